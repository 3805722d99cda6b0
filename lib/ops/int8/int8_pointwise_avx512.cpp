// The int8 pointwise kernel's AVX512-VNNI loops (int8_pointwise.h). Built with AVX-512 and VNNI
// code generation; run only after stem::available().
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "ops/int8/int8_pointwise.h"
#include "ops/int8/int8_vnni_avx512.h"

namespace ipex::quant::pointwise {

namespace {

using vnni::broadcast32;
using vnni::dot_add;

constexpr int kMr = 6;  // pixels a tile: 6 x 4 accumulators, 4 weight vectors, a broadcast
constexpr int kNr = 4;  // 16-channel blocks a tile
constexpr int64_t kTileChannels = 64;
constexpr int64_t kChunkTiles = 8;  // pixel tiles that share an input chunk across the channel tiles

template <int MR, bool kInS8, bool kSum, bool kReluBeforeSum, bool kSummandS8, bool kOutS8>
void run_tile(const Plan &p, const uint8_t *const *a, const int8_t *w, const float *scale_at, const float *shift_at,
              uint8_t *out) {
    __m512i acc[MR][kNr];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < kNr; ++j) acc[i][j] = _mm512_setzero_si512();
    const int64_t groups = p.k / 4;
    for (int64_t g = 0; g < groups; ++g, w += kNr * 64) {
        __m512i wv[kNr];
#pragma GCC unroll 4
        for (int j = 0; j < kNr; ++j) wv[j] = _mm512_loadu_si512(w + 64 * j);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            __m512i x = broadcast32(a[i] + 4 * g);
            if constexpr (kInS8) x = _mm512_xor_si512(x, _mm512_set1_epi8(static_cast<char>(0x80)));
#pragma GCC unroll 4
            for (int j = 0; j < kNr; ++j) dot_add(acc[i][j], x, wv[j]);
        }
    }
    const vnni::EpilogueRegs e(p.folded);
    __m512 scale[kNr], shift[kNr];
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) {
        scale[j] = _mm512_loadu_ps(scale_at + 16 * j);
        shift[j] = _mm512_loadu_ps(shift_at + 16 * j);
    }
    if (e.in_int32) {
        const __m512i lo = vnni::lo_bytes(p.folded);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            uint8_t *o = out + i * p.n;
            _mm512_storeu_si512(o, vnni::epilogue64<kSum, kReluBeforeSum, kSummandS8, kOutS8>(e, acc[i], scale, shift,
                                                                                              o, lo));
        }
        return;
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
        uint8_t *o = out + i * p.n;
#pragma GCC unroll 4
        for (int j = 0; j < kNr; ++j)
            _mm_storeu_si128(reinterpret_cast<__m128i *>(o + 16 * j),
                             vnni::epilogue<kSum, kReluBeforeSum, kSummandS8, kOutS8>(e, acc[i][j], scale[j], shift[j],
                                                                              o + 16 * j));
    }
}

using TileFn = void (*)(const Plan &, const uint8_t *const *, const int8_t *, const float *, const float *,
                        uint8_t *);

template <bool kInS8, bool kSum, bool kRelu, bool kS8, bool kOutS8, size_t... M>
constexpr std::array<TileFn, kMr> tiles_for(std::index_sequence<M...>) {
    return {&run_tile<static_cast<int>(M) + 1, kInS8, kSum, kRelu, kS8, kOutS8>...};
}

using Tiles = std::array<std::array<TileFn, kMr>, 5>;

template <bool kInS8, bool kOutS8>
constexpr Tiles tiles_by_epilogue() {
    constexpr auto m = std::make_index_sequence<kMr>();
    return {tiles_for<kInS8, false, false, false, kOutS8>(m), tiles_for<kInS8, true, false, false, kOutS8>(m),
            tiles_for<kInS8, true, false, true, kOutS8>(m), tiles_for<kInS8, true, true, false, kOutS8>(m),
            tiles_for<kInS8, true, true, true, kOutS8>(m)};
}

// By input s8 x 2 + output s8, then [sum ? 1 + 2 x relu before it + summand s8 : 0], then pixels - 1.
constexpr std::array<Tiles, 4> kTiles = {tiles_by_epilogue<false, false>(), tiles_by_epilogue<false, true>(),
                                         tiles_by_epilogue<true, false>(), tiles_by_epilogue<true, true>()};

}  // namespace

void run(const Plan &p, const uint8_t *src, int64_t images, int64_t h, int64_t w, uint8_t *dst) {
    const int64_t oh = (h - 1) / p.stride_h + 1, ow = (w - 1) / p.stride_w + 1;
    const int64_t m = images * oh * ow;
    const int64_t tiles = (m + kMr - 1) / kMr;
    const int64_t channel_tiles = p.n / kTileChannels;
    const int64_t tile_bytes = p.k * kTileChannels;
    const vnni::Epilogue &e = p.epilogue;
    const auto &tile_fns = kTiles[2 * p.in_s8 + e.out_s8][e.sum ? 1 + 2 * e.relu + e.sum_s8 : 0];
    const int64_t step = p.stride_w * p.k;  // input bytes from one output pixel to the next in a row
    // The input of each output pixel of tiles [first, last) (the last may be short), found once
    // for every channel tile that reads them: by steps along a row, a division only at the first.
    const auto chunk_inputs = [&](int64_t first, int64_t last, const uint8_t **inputs) {
        const int64_t start = first * kMr, stop = std::min(m, last * kMr);
        if (p.stride_h == 1 && p.stride_w == 1) {  // dense: pixel q reads src + q x k
            for (int64_t q = start; q < stop; ++q) inputs[q - start] = src + q * p.k;
            return stop - start;
        }
        int64_t row = start / ow, x = start % ow;
        const auto row_start = [&] { return src + ((row / oh) * h + (row % oh) * p.stride_h) * w * p.k; };
        const uint8_t *in_row = row_start();
        for (int64_t q = start; q < stop; ++q) {
            if (x == ow) {  // the next output row (only when a pixel of it is read)
                x = 0;
                ++row;
                in_row = row_start();
            }
            inputs[q - start] = in_row + x++ * step;
        }
        return stop - start;
    };
    // The chunk's tiles at channel tile ct, from the first pixel `start`.
    const auto run_chunk = [&](int64_t start, int64_t pixels, const uint8_t *const *inputs, int64_t ct) {
        const int8_t *weights = p.packed.data_ptr<int8_t>() + ct * tile_bytes;
        const int64_t channel = ct * kTileChannels;
        const float *scale = p.scale.data() + channel, *shift = p.shift.data() + channel;
        for (int64_t i = 0; i < pixels; i += kMr) {
            const int mr = static_cast<int>(std::min<int64_t>(kMr, pixels - i));
            tile_fns[mr - 1](p, inputs + i, weights, scale, shift, dst + (start + i) * p.n + channel);
        }
    };
    // Each thread takes an equal share of the pixel tiles (a contiguous run: the pixels the
    // layer before most likely left in its core's cache when it split the same way) and walks it
    // in chunks of tiles, each chunk through every channel tile, so a chunk's input is read
    // from the cache and a channel tile's weights stay in L1 across the chunk's tiles. A split
    // into (chunk, channel tile) items instead left whole chunks on one side: at 14x14 pixels a
    // thread had 120 pixels' work and the other 76.
    const int64_t threads = std::min<int64_t>(std::max(1, at::get_num_threads()), tiles);
    at::parallel_for(0, threads, 1, [&](int64_t first_thread, int64_t last_thread) {
        for (int64_t t = first_thread; t < last_thread; ++t) {
            const int64_t end = tiles * (t + 1) / threads;
            const uint8_t *inputs[kChunkTiles * kMr];
            for (int64_t tile = tiles * t / threads; tile < end; tile += kChunkTiles) {
                const int64_t pixels = chunk_inputs(tile, std::min(end, tile + kChunkTiles), inputs);
                for (int64_t ct = 0; ct < channel_tiles; ++ct) run_chunk(tile * kMr, pixels, inputs, ct);
            }
        }
    });
}

}  // namespace ipex::quant::pointwise
