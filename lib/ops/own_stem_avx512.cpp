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

// The pairs a tile multiplies: for each pair of the window (the kernel rows' pairs, then the
// tail groups'), where output pixel 0's pair is and how far the next pixel's is. One loop over
// them all keeps the sums in registers (a loop per kernel row stored and reloaded all 24 between
// rows: a 3x3 stem ran at 40% of the peak, a 7x7 one at 78%).
struct Tile {
    const uint16_t *const *src;   // per pair: output pixel 0's
    const int64_t *stride;        // per pair: values from one output pixel's to the next
    int64_t pairs;
    int64_t x;                    // the tile's first output pixel
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
    for (int64_t g = 0; g < t.pairs; ++g, w += NR * 32) {
        const int64_t step = t.stride[g];
        const uint16_t *at = t.src[g] + t.x * step;
        __m512bh wv[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(w + 32 * j);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
            int32_t pair;
            std::memcpy(&pair, at + i * step, sizeof pair);
            const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_dpbf16_ps(acc[i * NR + j], a, wv[j]);
        }
    }
    own_kernels::apply_block<true, MR * NR>(*t.activation, acc);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) {
            ::ipex::kernels::avx512::store_bf16(t.dst + i * t.dst_step + 16 * j, ::ipex::kernels::avx512::tail_mask(t.channels - 16 * j),
                               acc[i * NR + j]);
        }
}

template <int MR, int NR>
struct TileKernel {
    static void run(const Tile &t) { run_tile<MR, NR>(t); }
};
const auto kTiles = TileTable<Tile, TileKernel>::table();

// Word j of output vector v of 16 pixels of c channels (word 32 v + j: pixel (32 v + j) / c,
// channel (32 v + j) % c), from [c0 | c1] (indices 0-31) and [c2 | c3] (32-63), each channel's
// 16 pixels in order.
__m512i pixel_order(int64_t c, int64_t v) {
    alignas(64) int16_t idx[32];
    for (int64_t j = 0; j < 32; ++j) {
        const int64_t word = 32 * v + j, pixel = word / c, channel = word % c;
        idx[j] = static_cast<int16_t>(word < 16 * c ? 16 * channel + pixel : 0);
    }
    return _mm512_load_si512(idx);
}

// The padded input rows a run of output rows reads, each made once: a ring of kh rows, each
// (pad + w + pad) pixels of the input's channels (zeros in the padding), and where the kernel
// rows have tails, each ring row's tail value of every output pixel's window (Plan::tail_groups).
class RowRing {
public:
    RowRing(const Plan &p, const Source &src, int64_t h, int64_t w, int64_t ow)
        : p_(p), src_(src), h_(h), w_(w), ow_(ow), values_((w + 2 * p.pad_w) * p.channels), data_(p.kh * values_),
          tail_values_(ow + kTailPad), tails_(p.tail_groups() ? p.kh * tail_values_ : 0), tags_(p.kh, {-1, 0}) {
        for (int64_t v = 0; v < 2; ++v) order_[v] = pixel_order(p.channels, v);
    }

    // Row y (input coordinates, may be outside 0..h-1) of image `image`, from pixel -pad_w.
    const uint16_t *row(int64_t image, int64_t y) {
        const int64_t slot = slot_of(y);
        uint16_t *dst = data_.data() + slot * values_;
        if (tags_[slot].first == image && tags_[slot].second == y) return dst;
        tags_[slot] = {image, y};
        const int64_t c = p_.channels, left = p_.pad_w * c, body = w_ * c;
        if (y < 0 || y >= h_) {
            std::memset(dst, 0, values_ * sizeof(uint16_t));
        } else {
            std::memset(dst, 0, left * sizeof(uint16_t));
            std::memset(dst + left + body, 0, (values_ - left - body) * sizeof(uint16_t));
            if (src_.planes)
                from_planes(image, y, dst + left);
            else
                std::memcpy(dst + left, src_.bf16_last + (image * h_ + y) * body, body * sizeof(uint16_t));
        }
        if (p_.tail_groups()) {  // the row's last value of each output pixel's window
            uint16_t *tail = tails_.data() + slot * tail_values_;
            const uint16_t *from = dst + p_.row_values() - 1;
            const int64_t step = p_.stride_w * c;
            for (int64_t x = 0; x < ow_; ++x) tail[x] = from[x * step];
        }
        return dst;
    }

    // The tails of row y (row() called for it last): one value an output pixel, kTailPad past ow
    // (unset: the pairs they would make are never read).
    const uint16_t *tails(int64_t y) const { return tails_.data() + slot_of(y) * tail_values_; }

    static constexpr int64_t kTailPad = 32;

private:
    int64_t slot_of(int64_t y) const { return ((y % p_.kh) + p_.kh) % p_.kh; }

    // 16 pixels at a time: each channel's 16 fp32 values rounded to bf16 (nearest even), then
    // interleaved into pixels by one permute per 32 values written.
    void from_planes(int64_t image, int64_t y, uint16_t *dst) const {
        const int64_t plane = h_ * w_, c = p_.channels;
        const float *at = src_.planes + image * c * plane + y * w_;
        if (y + kAheadRows < h_)
            for (int64_t k = 0; k < c; ++k) ::ipex::kernels::avx512::prefetch_floats(at + k * plane + kAheadRows * w_, w_);
        for (int64_t x = 0; x < w_; x += 16) {
            const int64_t n = std::min<int64_t>(16, w_ - x);
            const __mmask16 m = ::ipex::kernels::avx512::tail_mask(n);
            __m256i v[4];
            for (int64_t k = 0; k < 4; ++k)
                v[k] = k < c ? ::ipex::kernels::avx512::fp32_to_bf16(_mm512_maskz_loadu_ps(m, at + k * plane + x))
                             : _mm256_setzero_si256();
            const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(v[0]), v[1], 1);
            const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(v[2]), v[3], 1);
            uint16_t *out = dst + x * c;
            for (int64_t part = 0; 32 * part < n * c; ++part) {
                const int64_t words = std::min<int64_t>(32, n * c - 32 * part);
                const __mmask32 keep = words == 32 ? ~__mmask32(0) : static_cast<__mmask32>((1u << words) - 1);
                _mm512_mask_storeu_epi16(out + 32 * part, keep, _mm512_permutex2var_epi16(a, order_[part], b));
            }
        }
    }

    // fp32 rows are read from memory (a network's input): the row kAheadRows below is asked for
    // when one is converted, so it is in cache when its turn comes.
    static constexpr int64_t kAheadRows = 4;

    const Plan &p_;
    const Source &src_;
    int64_t h_, w_, ow_, values_;
    std::vector<uint16_t> data_;
    int64_t tail_values_;
    std::vector<uint16_t> tails_;
    std::vector<std::pair<int64_t, int64_t>> tags_;  // (image, row) each slot holds
    __m512i order_[2];
};

// A thread's maker of output rows: its ring of input rows and each row's tiles.
class RowMaker {
public:
    RowMaker(const Plan &p, const Source &src, int64_t h, int64_t w, int64_t ow)
        : p_(p), ow_(ow), ring_(p, src, h, w, ow), src_(p.pairs()), stride_(p.pairs(), p.stride_w * p.channels),
          plane_(ow + RowRing::kTailPad), pairs_(p.tail_groups() * plane_), zeros_(plane_) {
        // The tail groups' pairs are one a pixel (2 values); the rows' in place, the stride's pixels apart.
        for (int64_t k = 0; k < p.tail_groups(); ++k) {
            stride_[p.kh * p.row_pairs() + k] = 2;
            src_[p.kh * p.row_pairs() + k] = reinterpret_cast<const uint16_t *>(pairs_.data() + k * plane_);
        }
    }

    // Output row y of image `image`, written at out_row (ow pixels of out_channels values).
    void make(int64_t image, int64_t y, uint16_t *out_row) {
        const Plan &p = p_;
        const int64_t y0 = y * p.stride_h - p.pad_h;
        for (int64_t r = 0, g = 0; r < p.kh; ++r) {
            const uint16_t *row = ring_.row(image, y0 + r);
            for (int64_t q = 0; q < p.row_pairs(); ++q) src_[g++] = row + 2 * q;
        }
        if (p.tail_groups()) merge_tails(y0);
        const int64_t tiles = p.tiles();
        const auto *packed = reinterpret_cast<const uint16_t *>(p.packed.data_ptr<int16_t>());
        for (int64_t t = 0; t < tiles; ++t) {
            const int64_t first = t * kTileChannels;
            const int64_t channels = std::min(kTileChannels, p.out_channels - first);
            const int nr = static_cast<int>((channels + 15) / 16);
            Tile tile{src_.data(), stride_.data(), p.pairs(), 0, packed + t * p.tile_values(), p.bias.data() + first,
                      &p.activation, nullptr, p.out_channels, channels};
            const int64_t most = kMaxMr[nr - 1];
            for (int64_t x = 0; x < ow_; x += most) {
                const int mr = static_cast<int>(std::min<int64_t>(most, ow_ - x));
                tile.x = x;
                tile.dst = out_row + x * p.out_channels + first;
                kTiles[nr - 1][mr - 1](tile);
            }
        }
    }

private:
    // The tail pairs of every output pixel of the row whose window starts at input row y0:
    // group g's pair of pixel x at g x plane_ + x, the tails of rows 2g and 2g + 1 (a zero past
    // the kernel's last row), 16 pixels at a time.
    void merge_tails(int64_t y0) {
        const Plan &p = p_;
        const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38,
                                            6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
        for (int64_t g = 0; g < p.tail_groups(); ++g) {
            const uint16_t *first = ring_.tails(y0 + 2 * g);
            const uint16_t *second = 2 * g + 1 < p.kh ? ring_.tails(y0 + 2 * g + 1) : zeros_.data();
            uint32_t *out = pairs_.data() + g * plane_;
            for (int64_t x = 0; x < ow_; x += 16) {
                const auto *a16 = reinterpret_cast<const __m256i *>(first + x);
                const auto *b16 = reinterpret_cast<const __m256i *>(second + x);
                const __m512i a = _mm512_castsi256_si512(_mm256_loadu_si256(a16));
                const __m512i b = _mm512_castsi256_si512(_mm256_loadu_si256(b16));
                _mm512_storeu_si512(out + x, _mm512_permutex2var_epi16(a, lo, b));
            }
        }
    }

    const Plan &p_;
    int64_t ow_;
    RowRing ring_;
    std::vector<const uint16_t *> src_;  // Tile::src of the row being made (the tail groups' fixed)
    std::vector<int64_t> stride_;        // Tile::stride
    int64_t plane_;  // pairs of one tail group
    std::vector<uint32_t> pairs_;
    std::vector<uint16_t> zeros_;  // the tails of a row past the kernel's last
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
