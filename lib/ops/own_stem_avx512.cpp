// The own bf16 stem kernel's AVX512-BF16 loops (own_stem.h). Built with AVX-512 and AVX512-BF16
// code generation; run only after own_stem::available().
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "ops/own_kernels_avx512.h"
#include "ops/own_stem.h"

namespace ipex::ops::own_stem {

namespace {

// Output pixels a tile of NR 16-channel blocks takes: MR x NR sums, NR weight vectors and a
// broadcast in the 32 registers (fewer blocks: more pixels share each weight load).
constexpr int kMaxMr[4] = {12, 12, 8, 6};
constexpr int kMr = 12;

struct Tile {
    const uint16_t *const *rows;  // kh ring rows at the tile's first pixel's window
    int64_t kh, pairs;            // pairs a kernel row: 2 kw
    int64_t step;                 // values from one output pixel's window to the next
    const uint16_t *weights;      // the tile's packed weights
    const float *bias;            // the tile's first channel's
    const own_kernels::Problem *activation;
    uint16_t *dst;                // the tile's first pixel, first channel
    int64_t dst_step;             // values between output pixels
    int64_t channels;             // the tile's output channels (below 64 only in the last tile)
};

template <int MR, int NR>
void run_tile(const Tile &t) {
    __m512 acc[MR * NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
        const __m512 b = _mm512_loadu_ps(t.bias + 16 * j);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) acc[i * NR + j] = b;
    }
    const uint16_t *w = t.weights;
    for (int64_t r = 0; r < t.kh; ++r) {
        const uint16_t *row = t.rows[r];
        for (int64_t q = 0; q < t.pairs; ++q, w += NR * 32) {
            __m512bh wv[NR];
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(w + 32 * j);
#pragma GCC unroll 12
            for (int i = 0; i < MR; ++i) {
                int32_t pair;
                std::memcpy(&pair, row + i * t.step + 2 * q, sizeof pair);
                const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
                for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_dpbf16_ps(acc[i * NR + j], a, wv[j]);
            }
        }
    }
    own_kernels::apply_block<true, MR * NR>(*t.activation, acc);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) {
            const int64_t left = t.channels - 16 * j;
            const __mmask16 m = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
            avx512::store_bf16(t.dst + i * t.dst_step + 16 * j, m, acc[i * NR + j]);
        }
}

using TileFn = void (*)(const Tile &);

template <int NR, size_t... M>
constexpr std::array<TileFn, kMr> tiles_for(std::index_sequence<M...>) {
    return {&run_tile<std::min(static_cast<int>(M) + 1, kMaxMr[NR - 1]), NR>...};
}

const std::array<std::array<TileFn, kMr>, 4> kTiles = {
    tiles_for<1>(std::make_index_sequence<kMr>()), tiles_for<2>(std::make_index_sequence<kMr>()),
    tiles_for<3>(std::make_index_sequence<kMr>()), tiles_for<4>(std::make_index_sequence<kMr>())};

// Word 4k + c of the 8 pixels from pixel `first` on: channel c's value of pixel first + k, from
// [c0 | c1] (indices 0-31) and [c2 | c3] (32-63), each channel 16 pixels.
__m512i pixel_order(int first) {
    alignas(64) int16_t idx[32];
    for (int k = 0; k < 8; ++k)
        for (int c = 0; c < 4; ++c) idx[4 * k + c] = static_cast<int16_t>(16 * c + first + k);
    return _mm512_load_si512(idx);
}

// The padded input rows a run of output rows reads, each made once: a ring of kh rows, each
// (pad + w + pad) pixels of kPixelValues values (zeros in the padding and past the channels).
class RowRing {
public:
    RowRing(const Plan &p, const Source &src, int64_t h, int64_t w)
        : p_(p), src_(src), h_(h), w_(w), values_((w + 2 * p.pad_w) * kPixelValues), data_(p.kh * values_),
          tags_(p.kh, {-1, 0}), low_(pixel_order(0)), high_(pixel_order(8)) {}

    // Row y (input coordinates, may be outside 0..h-1) of image `image`, from pixel -pad_w.
    const uint16_t *row(int64_t image, int64_t y) {
        const int64_t slot = ((y % p_.kh) + p_.kh) % p_.kh;
        uint16_t *dst = data_.data() + slot * values_;
        if (tags_[slot].first == image && tags_[slot].second == y) return dst;
        tags_[slot] = {image, y};
        const int64_t left = p_.pad_w * kPixelValues, body = w_ * kPixelValues;
        if (y < 0 || y >= h_) {
            std::memset(dst, 0, values_ * sizeof(uint16_t));
            return dst;
        }
        std::memset(dst, 0, left * sizeof(uint16_t));
        std::memset(dst + left + body, 0, (values_ - left - body) * sizeof(uint16_t));
        if (src_.planes)
            from_planes(image, y, dst + left);
        else
            from_last(image, y, dst + left);
        return dst;
    }

private:
    // 16 pixels at a time: each channel's 16 fp32 values rounded to bf16 (nearest even), then
    // interleaved into pixels by two permutes.
    void from_planes(int64_t image, int64_t y, uint16_t *dst) const {
        const int64_t plane = h_ * w_, c = p_.channels;
        const float *at = src_.planes + image * c * plane + y * w_;
        if (y + kAheadRows < h_)
            for (int64_t k = 0; k < c; ++k) prefetch(at + k * plane + kAheadRows * w_, w_);
        for (int64_t x = 0; x < w_; x += 16) {
            const int64_t n = std::min<int64_t>(16, w_ - x);
            const __mmask16 m = n == 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
            __m256i v[4];
            for (int64_t k = 0; k < 4; ++k)
                v[k] = k < c ? avx512::fp32_to_bf16(_mm512_maskz_loadu_ps(m, at + k * plane + x))
                             : _mm256_setzero_si256();
            const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(v[0]), v[1], 1);
            const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(v[2]), v[3], 1);
            uint16_t *out = dst + x * kPixelValues;
            const int64_t low = std::min<int64_t>(n, 8), high = n - low;
            const auto words = [](int64_t pixels) {
                return pixels >= 8 ? ~__mmask32(0) : static_cast<__mmask32>((1u << (4 * pixels)) - 1);
            };
            _mm512_mask_storeu_epi16(out, words(low), _mm512_permutex2var_epi16(a, low_, b));
            if (high > 0) _mm512_mask_storeu_epi16(out + 32, words(high), _mm512_permutex2var_epi16(a, high_, b));
        }
    }

    void from_last(int64_t image, int64_t y, uint16_t *dst) const {
        const int64_t c = p_.channels;
        const uint16_t *from = src_.bf16_last + (image * h_ + y) * w_ * c;
        for (int64_t x = 0; x < w_; ++x) {
            uint16_t *pixel = dst + x * kPixelValues;
            for (int64_t k = 0; k < kPixelValues; ++k) pixel[k] = k < c ? from[x * c + k] : 0;
        }
    }

    // fp32 rows are read from memory (a network's input): the row kAheadRows below is asked for
    // when one is converted, so it is in cache when its turn comes.
    static constexpr int64_t kAheadRows = 4;
    static void prefetch(const float *from, int64_t values) {
        for (int64_t i = 0; i < values; i += 16) _mm_prefetch(reinterpret_cast<const char *>(from + i), _MM_HINT_T0);
    }

    const Plan &p_;
    const Source &src_;
    int64_t h_, w_, values_;
    std::vector<uint16_t> data_;
    std::vector<std::pair<int64_t, int64_t>> tags_;  // (image, row) each slot holds
    __m512i low_, high_;
};

// A thread's maker of output rows: its ring of input rows and each row's tiles.
class RowMaker {
public:
    RowMaker(const Plan &p, const Source &src, int64_t h, int64_t w, int64_t ow)
        : p_(p), ow_(ow), ring_(p, src, h, w), rows_(p.kh), at_(p.kh) {}

    // Output row y of image `image`, written at out_row (ow pixels of out_channels values).
    void make(int64_t image, int64_t y, uint16_t *out_row) {
        const Plan &p = p_;
        for (int64_t r = 0; r < p.kh; ++r) rows_[r] = ring_.row(image, y * p.stride_h - p.pad_h + r);
        const int64_t tiles = (p.out_channels + kTileChannels - 1) / kTileChannels;
        const auto *packed = reinterpret_cast<const uint16_t *>(p.packed.data_ptr<int16_t>());
        const int64_t step = p.stride_w * kPixelValues;
        for (int64_t t = 0; t < tiles; ++t) {
            const int64_t first = t * kTileChannels;
            const int64_t channels = std::min(kTileChannels, p.out_channels - first);
            const int nr = static_cast<int>((channels + 15) / 16);
            Tile tile{at_.data(), p.kh, 2 * p.kw, step, packed + t * p.tile_values(), p.bias.data() + first,
                      &p.activation, nullptr, p.out_channels, channels};
            const int64_t most = kMaxMr[nr - 1];
            for (int64_t x = 0; x < ow_; x += most) {
                const int mr = static_cast<int>(std::min<int64_t>(most, ow_ - x));
                for (int64_t r = 0; r < p.kh; ++r) at_[r] = rows_[r] + x * step;
                tile.dst = out_row + x * p.out_channels + first;
                kTiles[nr - 1][mr - 1](tile);
            }
        }
    }

private:
    const Plan &p_;
    int64_t ow_;
    RowRing ring_;
    std::vector<const uint16_t *> rows_, at_;  // the kernel rows, and at a tile's first pixel
};

}  // namespace

void run(const Plan &p, const Source &src, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, uint16_t *dst) {
    // Rows of output a task: enough that the ring's copies (kh rows per stride rows) stay few.
    const int64_t grain = std::max<int64_t>(1, std::min<int64_t>(oh, 8));
    at::parallel_for(0, n * oh, grain, [&](int64_t begin, int64_t end) {
        RowMaker maker(p, src, h, w, ow);
        for (int64_t index = begin; index < end; ++index)
            maker.make(index / oh, index % oh, dst + index * ow * p.out_channels);
    });
}

}  // namespace ipex::ops::own_stem
