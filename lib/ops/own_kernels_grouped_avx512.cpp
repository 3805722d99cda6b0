// The own grouped convolution kernel's AVX-512 build (own_kernels.h, run_grouped): a block of
// kPixels output pixels (own_kernels_grouped.h walks them), for every 16-channel output tile of
// every group in turn, the block's input pixels read from memory once (by the first group) and
// from L1 after that. Each sum is a register; per tap and input channel (bf16: pair of
// channels) one weight vector is loaded and multiplied by each pixel's broadcast input value.
// Built with AVX-512 and AVX512-BF16 flags; runs only after own_kernels::available().
#include <immintrin.h>

#include <cstring>

#include "ops/own_kernels_avx512.h"
#include "ops/own_kernels_grouped.h"

namespace ipex::ops::own_kernels {
namespace {

// Output pixels per block: the sums of one tile for kPixels pixels take kPixels registers, the
// weight one more; 12 keeps two VDPBF16PS per cycle busy over their latency.
constexpr int kPixels = 12;

// src's element type.
template <bool kBf16>
using Elem = std::conditional_t<kBf16, uint16_t, float>;

template <bool kBf16>
using Window = GroupedWindow<Elem<kBf16>, kPixels>;

// Sums of one 16-output tile of one group over every tap, for kCount pixels: `in` is the
// group's first input channel, `w` the tile's packed weight (pack order of own_kernels.h).
template <bool kBf16, int kCount>
inline __attribute__((always_inline)) void tile_sums(const Grouped &p, const Window<kBf16> &win, int64_t in,
                                                     const Elem<kBf16> *w, __m512 *acc) {
    // bf16: a tap's weight is in_per_group / 2 vectors of 16 outputs x 2 inputs; fp32: in_per_group of 16.
    const int64_t steps = kBf16 ? p.in_per_group / 2 : p.in_per_group;
    constexpr int64_t kStep = kBf16 ? 2 * kLanes : kLanes;
    for (int64_t t = 0; t < p.kh * p.kw; ++t) {
        const Elem<kBf16> *s[kCount];
        for (int j = 0; j < kCount; ++j) s[j] = win.taps[t][j] + in;
        for (int64_t i = 0; i < steps; ++i, w += kStep) {
            if constexpr (kBf16) {
                const __m512bh wv = (__m512bh)_mm512_loadu_si512(w);
                for (int j = 0; j < kCount; ++j) {
                    int32_t pair;
                    std::memcpy(&pair, s[j] + 2 * i, sizeof pair);
                    acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)_mm512_set1_epi32(pair), wv);
                }
            } else {
                const __m512 wv = _mm512_loadu_ps(w);
                for (int j = 0; j < kCount; ++j) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(s[j][i]), wv, acc[j]);
            }
        }
    }
}

// Every tile of every group for kCount pixels, written from dst element `out` on (the block's
// pixels are consecutive in dst).
template <bool kBf16, int kCount>
void block(const Grouped &p, const Window<kBf16> &win, int64_t out) {
    const int64_t tiles = p.out_per_group / kLanes;
    const int64_t c_out = p.groups * p.out_per_group;
    const int64_t tile_weight = p.kh * p.kw * p.in_per_group * kLanes;
    const auto *weight = static_cast<const Elem<kBf16> *>(p.weight);
    for (int64_t g = 0; g < p.groups; ++g)
        for (int64_t t = 0; t < tiles; ++t) {
            const int64_t o = g * p.out_per_group + t * kLanes;
            const __m512 b = p.bias ? _mm512_loadu_ps(p.bias + o) : _mm512_setzero_ps();
            __m512 acc[kCount];
            for (int j = 0; j < kCount; ++j) acc[j] = b;
            tile_sums<kBf16, kCount>(p, win, g * p.in_per_group, weight + (g * tiles + t) * tile_weight, acc);
            apply_block<kBf16, kCount>(p.activation, acc);
            for (int j = 0; j < kCount; ++j) store<kBf16>(p.dst, out + j * c_out + o, __mmask16(0xffff), acc[j]);
        }
}

template <bool kBf16, int... kCounts>
void block_of(int count, const Grouped &p, const Window<kBf16> &win, int64_t out,
              std::integer_sequence<int, kCounts...>) {
    ((count == kCounts + 1 ? block<kBf16, kCounts + 1>(p, win, out) : void()), ...);
}

template <bool kBf16>
void grouped(const Grouped &p) {
    for_each_grouped_block<Elem<kBf16>, kPixels>(p, [&](int count, const Window<kBf16> &win, int64_t out) {
        block_of<kBf16>(count, p, win, out, std::make_integer_sequence<int, kPixels>());
    });
}

}  // namespace

void run_grouped_avx512(const Grouped &p) {
    if (p.bf16) grouped<true>(p); else grouped<false>(p);
}

}  // namespace ipex::ops::own_kernels
