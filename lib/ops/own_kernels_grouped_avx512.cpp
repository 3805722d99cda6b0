// The own grouped convolution kernel (own_kernels.h, run_grouped): a block of kPixels output
// pixels consecutive in the output (across rows and images, so small images fill blocks too),
// for every 16-channel output tile of every group in turn, the block's input pixels read from
// memory once (by the first group) and from L1 after that. Each sum is a register; per tap and
// input channel (bf16: pair of channels) one weight vector is loaded and multiplied by each
// pixel's broadcast input value, read through a table of each pixel's input pixel per tap (a
// row of zeros for a tap in the padding), so strides and dilation change only the table.
// Built with AVX-512 and AVX512-BF16 flags; runs only after own_kernels::available().
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cstring>
#include <memory>

#include "ops/own_kernels_avx512.h"

namespace ipex::ops::own_kernels {
namespace {

// Output pixels per block: the sums of one tile for kPixels pixels take kPixels registers, the
// weight one more; 12 keeps two VDPBF16PS per cycle busy over their latency.
constexpr int kPixels = 12;

// src's element type.
template <bool kBf16>
using Elem = std::conditional_t<kBf16, uint16_t, float>;

// Where a block's taps read: taps[t][j] is pixel j's input pixel under tap t (channel 0), or
// a row of zeros where the tap falls in the padding.
template <bool kBf16>
struct Window {
    const Elem<kBf16> *taps[kGroupedMaxTaps][kPixels];
};

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
    using T = Elem<kBf16>;
    const int64_t c_in = p.groups * p.in_per_group, c_out = p.groups * p.out_per_group;
    const int64_t pixels = p.n * p.oh * p.ow, blocks = (pixels + kPixels - 1) / kPixels;
    const int64_t taps = p.kh * p.kw;
    // Each tap's input pixel relative to the tap (0, 0) one, when all of them are inside the image.
    int64_t offset[kGroupedMaxTaps];
    for (int64_t t = 0; t < taps; ++t) offset[t] = (t / p.kw * p.dilation_h * p.iw + t % p.kw * p.dilation_w) * c_in;
    const auto *src = static_cast<const T *>(p.src);
    const std::unique_ptr<T[]> zeros(new T[c_in]());  // what a tap in the padding reads
    // A block costs kPixels * c_out * in_per_group * taps products; give a thread 256k of them.
    const int64_t per_block = greater(1, kPixels * c_out * p.in_per_group * taps);
    at::parallel_for(0, blocks, greater(1, (1 << 18) / per_block), [&](int64_t begin, int64_t end) {
        Window<kBf16> win;
        for (int64_t u = begin; u < end; ++u) {
            const int64_t q0 = u * kPixels;
            const int count = static_cast<int>(lesser(kPixels, pixels - q0));
            int64_t ox = q0 % p.ow, oy = q0 / p.ow % p.oh, img = q0 / (p.ow * p.oh);
            for (int j = 0; j < count; ++j) {
                const int64_t iy0 = oy * p.stride_h - p.pad_h, ix0 = ox * p.stride_w - p.pad_w;
                const bool inside = iy0 >= 0 && ix0 >= 0 && iy0 + (p.kh - 1) * p.dilation_h < p.ih &&
                                    ix0 + (p.kw - 1) * p.dilation_w < p.iw;
                if (inside) {
                    const T *base = src + ((img * p.ih + iy0) * p.iw + ix0) * c_in;
                    for (int64_t t = 0; t < taps; ++t) win.taps[t][j] = base + offset[t];
                } else {
                    for (int64_t t = 0; t < taps; ++t) {
                        const int64_t iy = iy0 + t / p.kw * p.dilation_h, ix = ix0 + t % p.kw * p.dilation_w;
                        const bool in_image = iy >= 0 && iy < p.ih && ix >= 0 && ix < p.iw;
                        win.taps[t][j] = in_image ? src + ((img * p.ih + iy) * p.iw + ix) * c_in : zeros.get();
                    }
                }
                if (++ox == p.ow) {
                    ox = 0;
                    if (++oy == p.oh) oy = 0, ++img;
                }
            }
            block_of<kBf16>(count, p, win, q0 * c_out, std::make_integer_sequence<int, kPixels>());
        }
    });
}

}  // namespace

void run_grouped(const Grouped &p) {
    if (p.bf16) grouped<true>(p); else grouped<false>(p);
}

}  // namespace ipex::ops::own_kernels
