// The own grouped convolution kernel's AVX2 + FMA build, fp32 only (own_kernels.h, run_grouped
// on CPUs without AVX-512): the AVX-512 build's plan with each 16-output tile as two 8-lane
// vectors, so a block holds kPixels = 6 output pixels: 12 sums, the tile's two weight vectors
// and one broadcast input take 15 of the 16 ymm registers, and 12 independent FMAs per input
// channel cover the FMA latency on two pipes. Same packed weight and block walk
// (own_kernels_grouped.h), and a tile walk of its own for large weights over few pixels
// (grouped_walks_tiles); it also takes a residual sum before the post-ops (Grouped::sum).
// Built with -mavx2 -mfma; runs only after own_kernels::grouped_available().
#include <immintrin.h>

#include "ops/own_kernels_avx2.h"
#include "ops/own_kernels_grouped.h"

namespace ipex::ops::own_kernels {
namespace {

constexpr int kPixels = 6;
constexpr int kHalf = 8;  // lanes of a ymm register; a tile is two of them

using Window = GroupedWindow<float, kPixels>;

// Tiles first_tile .. end_tile - 1 (tile k: group k / tiles, its tile k % tiles) for kCount
// pixels, written from dst element `out` on (the block's pixels are consecutive in dst; with
// p.sum, the summand read from there is added to the sums first, scaled). kRelu:
// the post-ops are one ReLU, applied to the sums in their registers before the store (a max
// each, the sum second so that NaN stays NaN; 1.05-1.25x on RegNet's grouped layers); any
// other post-ops run on the stored tile.
// (The tile loop stays in this function: GCC kept the sums in memory through the products
// when one tile was a function of its own.)
template <int kCount, bool kRelu>
void block(const Grouped &p, const Window &win, int64_t out, int64_t first_tile, int64_t end_tile) {
    const int64_t tiles = p.out_per_group / 16, c_out = p.groups * p.out_per_group;
    const int64_t taps = p.kh * p.kw, tile_weight = taps * p.in_per_group * 16;
    const auto *weight = static_cast<const float *>(p.weight);
    auto *dst = static_cast<float *>(p.dst) + out;
    for (int64_t k = first_tile; k < end_tile; ++k) {
        const int64_t g = k / tiles, t = k % tiles;
        const int64_t o = g * p.out_per_group + t * 16;
        // Sums of the tile's outputs 0-7 (lo) and 8-15 (hi) for each pixel.
        __m256 lo[kCount], hi[kCount];
        const __m256 bias_lo = p.bias ? _mm256_loadu_ps(p.bias + o) : _mm256_setzero_ps();
        const __m256 bias_hi = p.bias ? _mm256_loadu_ps(p.bias + o + kHalf) : _mm256_setzero_ps();
        for (int j = 0; j < kCount; ++j) lo[j] = bias_lo, hi[j] = bias_hi;
        const float *w = weight + k * tile_weight;
        for (int64_t tap = 0; tap < taps; ++tap) {
            const float *s[kCount];
            for (int j = 0; j < kCount; ++j) s[j] = win.taps[tap][j] + g * p.in_per_group;
            for (int64_t i = 0; i < p.in_per_group; ++i, w += 16) {
                const __m256 w_lo = _mm256_loadu_ps(w), w_hi = _mm256_loadu_ps(w + kHalf);
                for (int j = 0; j < kCount; ++j) {
                    const __m256 x = _mm256_broadcast_ss(s[j] + i);
                    lo[j] = _mm256_fmadd_ps(x, w_lo, lo[j]);
                    hi[j] = _mm256_fmadd_ps(x, w_hi, hi[j]);
                }
            }
        }
        if (p.sum) {
            const __m256 scale = _mm256_set1_ps(p.sum_scale);
            for (int j = 0; j < kCount; ++j) {
                lo[j] = _mm256_fmadd_ps(scale, _mm256_loadu_ps(dst + j * c_out + o), lo[j]);
                hi[j] = _mm256_fmadd_ps(scale, _mm256_loadu_ps(dst + j * c_out + o + kHalf), hi[j]);
            }
        }
        if (kRelu) {
            const __m256 zero = _mm256_setzero_ps();
            for (int j = 0; j < kCount; ++j) lo[j] = _mm256_max_ps(zero, lo[j]), hi[j] = _mm256_max_ps(zero, hi[j]);
        }
        for (int j = 0; j < kCount; ++j) {
            _mm256_storeu_ps(dst + j * c_out + o, lo[j]);
            _mm256_storeu_ps(dst + j * c_out + o + kHalf, hi[j]);
        }
        // Other post-ops on the stored tile, back from L1: apply_op's switch in the loop
        // above would keep the sums in memory through the products.
        if (!kRelu && p.activation.num_post_ops > 0)
            for (int j = 0; j < kCount; ++j)
                for (int h = 0; h < 2; ++h) {
                    float *d = dst + j * c_out + o + h * kHalf;
                    __m256 v = _mm256_loadu_ps(d);
                    for (int i = 0; i < p.activation.num_post_ops; ++i) v = apply_op(p.activation.post_ops[i], v);
                    _mm256_storeu_ps(d, v);
                }
    }
}

template <bool kRelu, int... kCounts>
void block_of(int count, const Grouped &p, const Window &win, int64_t out, int64_t first_tile, int64_t end_tile,
              std::integer_sequence<int, kCounts...>) {
    ((count == kCounts + 1 ? block<kCounts + 1, kRelu>(p, win, out, first_tile, end_tile) : void()), ...);
}

}  // namespace

void run_grouped_avx2(const Grouped &p) {
    const bool relu = p.activation.num_post_ops == 1 && p.activation.post_ops[0].act == Act::relu;
    const auto run = [&](int count, const Window &win, int64_t out, int64_t first_tile, int64_t end_tile) {
        if (relu) block_of<true>(count, p, win, out, first_tile, end_tile, std::make_integer_sequence<int, kPixels>());
        else block_of<false>(count, p, win, out, first_tile, end_tile, std::make_integer_sequence<int, kPixels>());
    };
    if (grouped_walks_tiles(p)) return for_each_grouped_tile<float, kPixels>(p, run);
    const int64_t tiles = p.groups * (p.out_per_group / 16);
    for_each_grouped_block<float, kPixels>(
        p, [&](int count, const Window &win, int64_t out) { run(count, win, out, 0, tiles); });
}

}  // namespace ipex::ops::own_kernels
