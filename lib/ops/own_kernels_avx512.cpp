// The own kernels (own_kernels.h): depthwise and pointwise convolution, post-ops, spatial
// mean, scale-shift. Built with AVX-512 and AVX512-BF16 flags; runs only after
// own_kernels::available().
//
// Depthwise: each output row (image, output y) is one task. Along the row, output pixels go in blocks of
// up to 8 with the channels in vectors of 16 lanes inside: a block's 8 accumulators take every
// tap's weight vector once, and the input pixels a block reads stay in the first-level cache
// for the next channel vector. Columns whose taps all fall inside the image skip the bounds
// checks; only the few at the edges test each tap. With bf16 inputs those interior columns
// of stride-1 3x3 and 5x5 kernels run on VDPBF16PS, two kernel rows per instruction
// (interior_pairs).
#include <ATen/Parallel.h>
#include <immintrin.h>

#include "ops/avx512_math.h"
#include "ops/own_kernels.h"

namespace ipex::ops::own_kernels {
namespace {

using avx512::kLanes;
using avx512::tail_mask;

// Inputs below this give exp(-x) about 5.5e34 at most: 1 + that stays finite and its
// reciprocal normal, so sigmoid is within 2e-35 of 0 there instead of a NaN.
constexpr float kSigmoidLowest = -80.f;

// Plain helpers rather than std::min/max: this file's flags must not reach inline functions
// other files share.
int64_t lesser(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t greater(int64_t a, int64_t b) { return a > b ? a : b; }

template <bool kBf16>
__m512 load(const void *base, int64_t i, __mmask16 m) {
    if constexpr (kBf16) return avx512::load_bf16(static_cast<const uint16_t *>(base) + i, m);
    return _mm512_maskz_loadu_ps(m, static_cast<const float *>(base) + i);
}

template <bool kBf16>
void store(void *base, int64_t i, __mmask16 m, __m512 v) {
    if constexpr (kBf16) {
        avx512::store_bf16(static_cast<uint16_t *>(base) + i, m, v);
    } else if (m == __mmask16(0xffff)) {
        _mm512_storeu_ps(static_cast<float *>(base) + i, v);  // see store_bf16
    } else {
        _mm512_mask_storeu_ps(static_cast<float *>(base) + i, m, v);
    }
}

// 1 / (1 + exp(-x)). For a bf16 output, the shorter exp and the 14-bit reciprocal (1e-4
// relative, against bf16's half spacing of 2e-3); for fp32, exp16 and a refined reciprocal
// (2^-28 relative).
template <bool kBf16Out>
__m512 sigmoid(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.f);
    const __m512 minus_x = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_max_ps(x, _mm512_set1_ps(kSigmoidLowest)));
    if constexpr (kBf16Out) return _mm512_rcp14_ps(_mm512_add_ps(one, avx512::exp16_bf16(minus_x)));
    const __m512 d = _mm512_add_ps(one, avx512::exp16(minus_x));
    const __m512 r = _mm512_rcp14_ps(d);  // then one Newton step
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.f)));
}

template <bool kBf16Out>
__m512 apply(const Problem &p, __m512 v) {
    for (int i = 0; i < p.num_post_ops; ++i) {
        const Eltwise &e = p.post_ops[i];
        switch (e.act) {
            case Act::relu: v = _mm512_max_ps(v, _mm512_setzero_ps()); break;
            case Act::leaky_relu: {
                const __mmask16 negative = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
                v = _mm512_mask_mul_ps(v, negative, v, _mm512_set1_ps(e.alpha));
                break;
            }
            case Act::clip:
                v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(e.alpha)), _mm512_set1_ps(e.beta));
                break;
            case Act::sigmoid: v = sigmoid<kBf16Out>(v); break;
            case Act::silu: v = _mm512_mul_ps(v, sigmoid<kBf16Out>(v)); break;
            case Act::hardswish: {
                const __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, _mm512_set1_ps(3.f)), _mm512_setzero_ps()),
                                               _mm512_set1_ps(6.f));
                v = _mm512_mul_ps(_mm512_mul_ps(v, t), _mm512_set1_ps(1.f / 6.f));
                break;
            }
        }
    }
    return v;
}

// `apply` over n vectors: one post-op switch for all of them, and in groups of 4, independent
// exp chains for the out-of-order core to overlap (without running out of registers).
template <bool kBf16Out, int kCount>
inline __attribute__((always_inline)) void apply_block(const Problem &p, __m512 *v) {
    constexpr int kGroup = 4;
    for (int i = 0; i < p.num_post_ops; ++i) {
        Problem one = p;
        one.num_post_ops = 1;
        one.post_ops[0] = p.post_ops[i];
        switch (p.post_ops[i].act) {
            case Act::sigmoid:
                for (int g = 0; g < kCount; g += kGroup)
                    for (int u = g; u < g + kGroup && u < kCount; ++u) v[u] = sigmoid<kBf16Out>(v[u]);
                break;
            case Act::silu:
                for (int g = 0; g < kCount; g += kGroup)
                    for (int u = g; u < g + kGroup && u < kCount; ++u) v[u] = _mm512_mul_ps(v[u], sigmoid<kBf16Out>(v[u]));
                break;
            default:
                for (int u = 0; u < kCount; ++u) v[u] = apply<kBf16Out>(one, v[u]);
        }
    }
}

// The end of a block: the post-ops over its sums, then their stores.
template <bool kBf16Out, int kBlock, int kVectors>
inline __attribute__((always_inline)) void store_block(const Problem &p, __m512 (&acc)[kBlock][kVectors],
                                                       const __mmask16 (&m)[kVectors], int64_t out, int64_t c0) {
    apply_block<kBf16Out, kBlock * kVectors>(p, &acc[0][0]);
    for (int j = 0; j < kBlock; ++j)
        for (int v = 0; v < kVectors; ++v) store<kBf16Out>(p.dst, out + j * p.c + c0 + v * kLanes, m[v], acc[j][v]);
}

// Where one output row reads: the taps kh in [kh_lo, kh_hi) fall inside the image.
struct Row {
    int64_t n = 0, oh = 0, kh_lo = 0, kh_hi = 0;
};

// The lanes of channel vector c0 .. c0 + 15 below c (none when c0 >= c).
__mmask16 channel_mask(int64_t c, int64_t c0) { return c0 >= c ? __mmask16(0) : tail_mask(c - c0); }

// The channel masks of vectors c0 .. and every sum of the block set to its channel's bias.
template <int kBlock, int kVectors>
void start_block(const Problem &p, int64_t c0, __mmask16 (&m)[kVectors], __m512 (&acc)[kBlock][kVectors]) {
    for (int v = 0; v < kVectors; ++v) {
        m[v] = channel_mask(p.c, c0 + v * kLanes);
        const __m512 b = p.bias ? _mm512_maskz_loadu_ps(m[v], p.bias + c0 + v * kLanes) : _mm512_setzero_ps();
        for (int j = 0; j < kBlock; ++j) acc[j][v] = b;
    }
}

// Output pixels [ow, ow + kBlock) of one row, every channel, kVectors channel vectors (16
// channels each) at a time: kBlock * kVectors independent sums hide the multiply-add latency.
// kEdge: test each tap's column.
template <bool kBf16In, bool kBf16Out, int kBlock, int kVectors, bool kEdge>
void block(const Problem &p, const Row &r, int64_t ow) {
    const int64_t c = p.c;
    const int64_t ih0 = r.oh * p.stride_h - p.pad_h;
    const int64_t iw0 = ow * p.stride_w - p.pad_w;
    const int64_t out = ((r.n * p.oh + r.oh) * p.ow + ow) * c;
    for (int64_t c0 = 0; c0 < c; c0 += kVectors * kLanes) {
        __mmask16 m[kVectors];
        __m512 acc[kBlock][kVectors];
        start_block<kBlock, kVectors>(p, c0, m, acc);
        for (int64_t kh = r.kh_lo; kh < r.kh_hi; ++kh) {
            const int64_t in_row = (r.n * p.ih + ih0 + kh * p.dilation_h) * p.iw;
            for (int64_t kw = 0; kw < p.kw; ++kw) {
                const float *wp = p.weight + (kh * p.kw + kw) * c + c0;
                __m512 w[kVectors];
                for (int v = 0; v < kVectors; ++v) w[v] = _mm512_maskz_loadu_ps(m[v], wp + v * kLanes);
                const int64_t col = iw0 + kw * p.dilation_w;
                for (int j = 0; j < kBlock; ++j) {
                    const int64_t iw = col + j * p.stride_w;
                    if (kEdge && (iw < 0 || iw >= p.iw)) continue;
                    const int64_t at = (in_row + iw) * c + c0;
                    for (int v = 0; v < kVectors; ++v)
                        acc[j][v] = _mm512_fmadd_ps(load<kBf16In>(p.src, at + v * kLanes, m[v]), w[v], acc[j][v]);
                }
            }
        }
        store_block<kBf16Out, kBlock, kVectors>(p, acc, m, out, c0);
    }
}

// An interior block for kernel width kKw, stride kStride, dilation 1: each input column is
// loaded and widened once per kernel row and added into every output pixel it reaches.
template <bool kBf16In, bool kBf16Out, int kBlock, int kVectors, int kKw, int kStride>
void interior_block(const Problem &p, const Row &r, int64_t ow) {
    constexpr int kSpan = (kBlock - 1) * kStride + kKw;
    const int64_t c = p.c;
    const int64_t ih0 = r.oh * p.stride_h - p.pad_h;
    const int64_t iw0 = ow * kStride - p.pad_w;
    const int64_t out = ((r.n * p.oh + r.oh) * p.ow + ow) * c;
    for (int64_t c0 = 0; c0 < c; c0 += kVectors * kLanes) {
        __mmask16 m[kVectors];
        __m512 acc[kBlock][kVectors];
        start_block<kBlock, kVectors>(p, c0, m, acc);
        for (int64_t kh = r.kh_lo; kh < r.kh_hi; ++kh) {
            const int64_t in_row = (r.n * p.ih + ih0 + kh * p.dilation_h) * p.iw + iw0;
            const float *wrow = p.weight + kh * kKw * c + c0;
#pragma GCC unroll 32
            for (int i = 0; i < kSpan; ++i) {
                __m512 x[kVectors];
                for (int v = 0; v < kVectors; ++v) x[v] = load<kBf16In>(p.src, (in_row + i) * c + c0 + v * kLanes, m[v]);
#pragma GCC unroll 8
                for (int kw = 0; kw < kKw; ++kw) {
                    const int d = i - kw;  // = j * kStride for the output pixel j this tap adds to
                    if (d < 0 || d % kStride != 0 || d / kStride >= kBlock) continue;
                    const int j = d / kStride;
                    for (int v = 0; v < kVectors; ++v)
                        acc[j][v] = _mm512_fmadd_ps(x[v], _mm512_loadu_ps(wrow + kw * c + v * kLanes), acc[j][v]);
                }
            }
        }
        store_block<kBf16Out, kBlock, kVectors>(p, acc, m, out, c0);
    }
}

// The lanes of the 32 bf16 channels c0 .. c0 + 31 below c.
__mmask32 channel_mask32(int64_t c, int64_t c0) {
    return c0 >= c ? __mmask32(0) : c - c0 >= 32 ? ~__mmask32(0) : __mmask32((1u << (c - c0)) - 1);
}

// Output channel q of a 32-channel block taken from the lanes the row-pair sums hold it in
// (Problem::weight_pairs, pair_lane_channel): kUnpair[16 half + q] is lo's lane j, or 16 + j
// for hi's lane j, where channel 16 half + q lies. Made at compile time.
struct UnpairTable {
    alignas(64) int32_t index[2 * kLanes] = {};
    constexpr UnpairTable() {
        for (int half = 0; half < 2; ++half)
            for (int j = 0; j < kLanes; ++j) index[pair_lane_channel(half, j)] = half * kLanes + j;
    }
};
constexpr UnpairTable kUnpair;

// The interior block of a bf16-input convolution on VDPBF16PS: two kernel rows at a time,
// each input column of both rows loaded once as bf16 and interleaved channel by channel
// (row kh in the low half of each 32-bit lane, row kh + 1 in the high half, or zero when kh
// is the last row the output row reads), so one instruction takes two taps of 16 channels
// against the paired weights; products exact in fp32, sums in fp32 as the fp32-weight path.
// kPairs blocks of 32 channels at a time.
template <bool kBf16Out, int kBlock, int kPairs, int kKw, int kStride>
void interior_pairs(const Problem &p, const Row &r, int64_t ow) {
    constexpr int kSpan = (kBlock - 1) * kStride + kKw;
    constexpr int kVectors = 2 * kPairs;
    const int64_t c = p.c, blocks32 = p.weight_pairs_blocks;
    const int64_t ih0 = r.oh * p.stride_h - p.pad_h;
    const int64_t iw0 = ow * kStride - p.pad_w;
    const int64_t out = ((r.n * p.oh + r.oh) * p.ow + ow) * c;
    const uint16_t *src = static_cast<const uint16_t *>(p.src);
    const __m512i unpair0 = _mm512_load_si512(kUnpair.index), unpair1 = _mm512_load_si512(kUnpair.index + kLanes);
    for (int64_t c0 = 0; c0 < c; c0 += 32 * kPairs) {
        __m512 lo[kBlock][kPairs], hi[kBlock][kPairs];
        for (int j = 0; j < kBlock; ++j)
            for (int q = 0; q < kPairs; ++q) lo[j][q] = hi[j][q] = _mm512_setzero_ps();
        __mmask32 m32[kPairs];
        for (int q = 0; q < kPairs; ++q) m32[q] = channel_mask32(c, c0 + 32 * q);
        for (int64_t kh = r.kh_lo; kh < r.kh_hi; kh += 2) {
            const bool two = kh + 1 < r.kh_hi;
            const int64_t row0 = (r.n * p.ih + ih0 + kh * p.dilation_h) * p.iw + iw0;
            const int64_t row1 = row0 + p.dilation_h * p.iw;
            const uint16_t *wrow = p.weight_pairs + (((two ? 0 : p.kh) + kh) * kKw * blocks32 + c0 / 32) * 64;
#pragma GCC unroll 32
            for (int i = 0; i < kSpan; ++i) {
                __m512bh plo[kPairs], phi[kPairs];
                for (int q = 0; q < kPairs; ++q) {
                    const __m512i x0 = _mm512_maskz_loadu_epi16(m32[q], src + (row0 + i) * c + c0 + 32 * q);
                    const __m512i x1 = two ? _mm512_maskz_loadu_epi16(m32[q], src + (row1 + i) * c + c0 + 32 * q)
                                           : _mm512_setzero_si512();
                    plo[q] = (__m512bh)_mm512_unpacklo_epi16(x0, x1);
                    phi[q] = (__m512bh)_mm512_unpackhi_epi16(x0, x1);
                }
#pragma GCC unroll 8
                for (int kw = 0; kw < kKw; ++kw) {
                    const int d = i - kw;  // = j * kStride for the output pixel j this tap adds to
                    if (d < 0 || d % kStride != 0 || d / kStride >= kBlock) continue;
                    const int j = d / kStride;
                    for (int q = 0; q < kPairs; ++q) {
                        const uint16_t *w = wrow + (kw * blocks32 + q) * 64;
                        lo[j][q] = _mm512_dpbf16_ps(lo[j][q], plo[q], (__m512bh)_mm512_loadu_si512(w));
                        hi[j][q] = _mm512_dpbf16_ps(hi[j][q], phi[q], (__m512bh)_mm512_loadu_si512(w + 32));
                    }
                }
            }
        }
        __mmask16 m[kVectors];
        __m512 acc[kBlock][kVectors];
        start_block<kBlock, kVectors>(p, c0, m, acc);
        for (int j = 0; j < kBlock; ++j)
            for (int q = 0; q < kPairs; ++q) {
                acc[j][2 * q] = _mm512_add_ps(acc[j][2 * q], _mm512_permutex2var_ps(lo[j][q], unpair0, hi[j][q]));
                acc[j][2 * q + 1] =
                    _mm512_add_ps(acc[j][2 * q + 1], _mm512_permutex2var_ps(lo[j][q], unpair1, hi[j][q]));
            }
        store_block<kBf16Out, kBlock, kVectors>(p, acc, m, out, c0);
    }
}

template <bool kBf16Out, int kBlock, int kPairs>
bool interior_paired(const Problem &p, const Row &r, int64_t ow) {
    // Stride 1 only: at stride 2 a block reads four times the input per output and the fewer
    // instructions did not make it faster (timed against oneDNN on efficientnet_b0's layers).
    if (!p.weight_pairs) return false;  // packed only where weight_pairs_used()
    if (p.kw == 3) interior_pairs<kBf16Out, kBlock, kPairs, 3, 1>(p, r, ow);
    else if (p.kw == 5) interior_pairs<kBf16Out, kBlock, kPairs, 5, 1>(p, r, ow);
    else return false;
    return true;
}

template <bool kBf16In, bool kBf16Out, int kBlock, int kVectors>
void interior(const Problem &p, const Row &r, int64_t ow) {
    if constexpr (kBf16In) {  // 4 pixels x 2 pairs or 8 pixels x 1 pair: 16 pairs of sums
        if (interior_paired<kBf16Out, kBlock, (kVectors >= 4 ? 2 : 1)>(p, r, ow)) return;
    }
    if (p.dilation_w == 1) {
        if (p.kw == 3 && p.stride_w == 1) return interior_block<kBf16In, kBf16Out, kBlock, kVectors, 3, 1>(p, r, ow);
        if (p.kw == 3 && p.stride_w == 2) return interior_block<kBf16In, kBf16Out, kBlock, kVectors, 3, 2>(p, r, ow);
        if (p.kw == 5 && p.stride_w == 1) return interior_block<kBf16In, kBf16Out, kBlock, kVectors, 5, 1>(p, r, ow);
        if (p.kw == 5 && p.stride_w == 2) return interior_block<kBf16In, kBf16Out, kBlock, kVectors, 5, 2>(p, r, ow);
    }
    block<kBf16In, kBf16Out, kBlock, kVectors, false>(p, r, ow);
}

template <bool kBf16In, bool kBf16Out, int kVectors>
void run_row(const Problem &p, int64_t row) {
    // With 4 channel vectors, 4 pixels make 16 sums; with fewer vectors, 8 pixels.
    constexpr int kWide = kVectors >= 4 ? 4 : 8;
    Row r;
    r.n = row / p.oh;
    r.oh = row % p.oh;
    const int64_t ih0 = r.oh * p.stride_h - p.pad_h;
    r.kh_lo = 0;
    r.kh_hi = p.kh;
    while (r.kh_lo < p.kh && ih0 + r.kh_lo * p.dilation_h < 0) ++r.kh_lo;
    while (r.kh_hi > r.kh_lo && ih0 + (r.kh_hi - 1) * p.dilation_h >= p.ih) --r.kh_hi;

    // Interior columns: ow * stride - pad >= 0 and the last tap ow * stride - pad + (kw - 1) * dilation < iw.
    int64_t lo = (p.pad_w + p.stride_w - 1) / p.stride_w;
    const int64_t last = p.iw - 1 - (p.kw - 1) * p.dilation_w + p.pad_w;  // ow * stride <= last
    int64_t hi = last < 0 ? 0 : last / p.stride_w + 1;
    lo = lesser(lo, p.ow);
    hi = greater(lo, lesser(hi, p.ow));

    int64_t ow = 0;
    for (; ow + 2 <= lo; ow += 2) block<kBf16In, kBf16Out, 2, kVectors, true>(p, r, ow);
    if (ow < lo) block<kBf16In, kBf16Out, 1, kVectors, true>(p, r, ow++);
    for (; ow + kWide <= hi; ow += kWide) interior<kBf16In, kBf16Out, kWide, kVectors>(p, r, ow);
    if (kWide == 8 && ow + 4 <= hi) {
        block<kBf16In, kBf16Out, 4, kVectors, false>(p, r, ow);
        ow += 4;
    }
    if (ow + 2 <= hi) {
        block<kBf16In, kBf16Out, 2, kVectors, false>(p, r, ow);
        ow += 2;
    }
    if (ow < hi) block<kBf16In, kBf16Out, 1, kVectors, false>(p, r, ow++);
    for (; ow + 2 <= p.ow; ow += 2) block<kBf16In, kBf16Out, 2, kVectors, true>(p, r, ow);
    if (ow < p.ow) block<kBf16In, kBf16Out, 1, kVectors, true>(p, r, ow);
}

template <bool kBf16In, bool kBf16Out, int kVectors>
void run_typed(const Problem &p) {
    // A row costs about ow * c * kh * kw fused multiply-adds; give a thread some 64k of them.
    const int64_t per_row = greater(1, p.ow * p.c * p.kh * p.kw);
    const int64_t grain = greater(1, 65536 / per_row);
    at::parallel_for(0, p.n * p.oh, grain, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) run_row<kBf16In, kBf16Out, kVectors>(p, row);
    });
}

template <bool kBf16In, bool kBf16Out>
void run_vectors(const Problem &p) {
    if (p.c <= kLanes) {
        run_typed<kBf16In, kBf16Out, 1>(p);
    } else if (p.c <= 2 * kLanes) {
        run_typed<kBf16In, kBf16Out, 2>(p);
    } else {
        run_typed<kBf16In, kBf16Out, 4>(p);
    }
}

template <bool kBf16>
void post_ops_in_place(const Problem &p, void *data, int64_t n) {
    constexpr int64_t kGrain = 1 << 14;
    constexpr int kUnroll = 4;
    const __mmask16 all = 0xFFFF;
    at::parallel_for(0, (n + kLanes - 1) / kLanes, kGrain / kLanes, [&](int64_t begin, int64_t end) {
        const int64_t full = lesser(end, n / kLanes);  // vectors without a tail
        int64_t v = begin;
        for (; v + kUnroll <= full; v += kUnroll) {
            __m512 x[kUnroll];
            for (int u = 0; u < kUnroll; ++u) x[u] = load<kBf16>(data, (v + u) * kLanes, all);
            apply_block<kBf16, kUnroll>(p, x);
            for (int u = 0; u < kUnroll; ++u) store<kBf16>(data, (v + u) * kLanes, all, x[u]);
        }
        for (; v < end; ++v) {
            const __mmask16 m = tail_mask(n - v * kLanes);
            store<kBf16>(data, v * kLanes, m, apply<kBf16>(p, load<kBf16>(data, v * kLanes, m)));
        }
    });
}

// The pointwise kernel's tile: kRows pixels from m0 by kVectors output vectors from vector
// v0, kRows * kVectors sums in registers (24 at most, with the weights and a broadcast).
template <bool kBf16, int kRows, int kVectors>
void pointwise_tile(const Pointwise &p, int64_t m0, int64_t v0) {
    const int64_t nv = (p.n + kLanes - 1) / kLanes;
    __m512 acc[kRows][kVectors];
    for (int v = 0; v < kVectors; ++v) {
        const __m512 b = p.bias ? _mm512_loadu_ps(p.bias + (v0 + v) * kLanes) : _mm512_setzero_ps();
        for (int r = 0; r < kRows; ++r) acc[r][v] = b;
    }
    if constexpr (kBf16) {
        const uint16_t *a = static_cast<const uint16_t *>(p.src) + m0 * p.k;
        const uint16_t *weight = static_cast<const uint16_t *>(p.weight);
        const int64_t pairs = p.k / 2;
        for (int64_t kp = 0; kp < pairs; ++kp) {
            const uint16_t *w = weight + (kp * nv + v0) * 2 * kLanes;
            __m512bh wv[kVectors];
            for (int v = 0; v < kVectors; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(w + v * 2 * kLanes);
            for (int r = 0; r < kRows; ++r) {
                int32_t pair;
                __builtin_memcpy(&pair, a + r * p.k + 2 * kp, sizeof pair);
                const __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
                for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, wv[v]);
            }
        }
        if (p.k % 2 != 0) {  // the last input channel, paired with a zero (never read past the row)
            const uint16_t *w = weight + (pairs * nv + v0) * 2 * kLanes;
            __m512bh wv[kVectors];
            for (int v = 0; v < kVectors; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(w + v * 2 * kLanes);
            for (int r = 0; r < kRows; ++r) {
                const __m512bh x = (__m512bh)_mm512_set1_epi32(a[r * p.k + p.k - 1]);
                for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, wv[v]);
            }
        }
    } else {
        const float *a = static_cast<const float *>(p.src) + m0 * p.k;
        const float *weight = static_cast<const float *>(p.weight);
        for (int64_t i = 0; i < p.k; ++i) {
            const float *w = weight + (i * nv + v0) * kLanes;
            __m512 wv[kVectors];
            for (int v = 0; v < kVectors; ++v) wv[v] = _mm512_loadu_ps(w + v * kLanes);
            for (int r = 0; r < kRows; ++r) {
                const __m512 x = _mm512_set1_ps(a[r * p.k + i]);
                for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_fmadd_ps(x, wv[v], acc[r][v]);
            }
        }
    }
    apply_block<kBf16, kRows * kVectors>(p.activation, &acc[0][0]);
    for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < kVectors; ++v)
            store<kBf16>(p.dst, (m0 + r) * p.n + (v0 + v) * kLanes, tail_mask(p.n - (v0 + v) * kLanes), acc[r][v]);
}

// Every output vector of kRows pixels from m0, four at a time.
template <bool kBf16, int kRows>
void pointwise_rows(const Pointwise &p, int64_t m0) {
    const int64_t nv = (p.n + kLanes - 1) / kLanes;
    int64_t v0 = 0;
    for (; v0 + 4 <= nv; v0 += 4) pointwise_tile<kBf16, kRows, 4>(p, m0, v0);
    switch (nv - v0) {
        case 3: pointwise_tile<kBf16, kRows, 3>(p, m0, v0); break;
        case 2: pointwise_tile<kBf16, kRows, 2>(p, m0, v0); break;
        case 1: pointwise_tile<kBf16, kRows, 1>(p, m0, v0); break;
        default: break;
    }
}

template <bool kBf16>
void pointwise_typed(const Pointwise &p) {
    constexpr int64_t kRows = 6;
    const int64_t blocks = (p.m + kRows - 1) / kRows;
    // A block costs about kRows * k * n multiply-adds; give a thread some 256k of them.
    const int64_t grain = greater(1, 262144 / greater(1, kRows * p.k * p.n));
    at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const int64_t m0 = b * kRows;
            if (m0 + kRows <= p.m) {
                pointwise_rows<kBf16, kRows>(p, m0);
            } else {
                for (int64_t m = m0; m < p.m; ++m) pointwise_rows<kBf16, 1>(p, m);
            }
        }
    });
}

// The sums of kVectors vectors of channels (the last one `tail`-masked) over pixels [q0, q1) of
// rows `stride` apart: four pixels at a time into four sets of sums, so that each add waits
// on the one four pixels back rather than the one before.
template <bool kBf16, int kVectors>
void sum_pixels(const void *src, int64_t at, int64_t stride, int64_t q0, int64_t q1, __mmask16 tail,
                __m512 *total) {
    constexpr int kUnroll = 4;
    __m512 sum[kUnroll][kVectors];
    for (int u = 0; u < kUnroll; ++u)
        for (int v = 0; v < kVectors; ++v) sum[u][v] = _mm512_setzero_ps();
    auto mask = [&](int v) { return v == kVectors - 1 ? tail : __mmask16(0xffff); };
    int64_t q = q0;
    for (; q + kUnroll <= q1; q += kUnroll)
        for (int u = 0; u < kUnroll; ++u)
            for (int v = 0; v < kVectors; ++v)
                sum[u][v] = _mm512_add_ps(sum[u][v], load<kBf16>(src, at + (q + u) * stride + v * kLanes, mask(v)));
    for (; q < q1; ++q)
        for (int v = 0; v < kVectors; ++v)
            sum[0][v] = _mm512_add_ps(sum[0][v], load<kBf16>(src, at + q * stride + v * kLanes, mask(v)));
    for (int v = 0; v < kVectors; ++v)
        total[v] = _mm512_add_ps(total[v], _mm512_add_ps(_mm512_add_ps(sum[0][v], sum[1][v]),
                                                         _mm512_add_ps(sum[2][v], sum[3][v])));
}

// One task per (image, block of up to 4 vectors of channels): the block's pixels summed down
// the image, kMeanChunk pixels at a time into fresh sums that then join the totals (fp32
// rounding grows with the chunk, not the image).
constexpr int64_t kMeanChunk = 256;

template <bool kBf16>
void spatial_mean_typed(const SpatialMean &p) {
    constexpr int64_t kVectors = 4, kBlock = kVectors * kLanes;
    const int64_t blocks = (p.c + kBlock - 1) / kBlock;
    const __m512 count = _mm512_set1_ps(static_cast<float>(p.hw));
    at::parallel_for(0, p.n * blocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
            const int64_t image = task / blocks, c0 = task % blocks * kBlock;
            const int64_t vectors = lesser(kVectors, (p.c - c0 + kLanes - 1) / kLanes);
            const __mmask16 tail = tail_mask(p.c - c0 - (vectors - 1) * kLanes);
            __m512 total[kVectors];
            for (int64_t v = 0; v < kVectors; ++v) total[v] = _mm512_setzero_ps();
            const int64_t at = image * p.hw * p.c + c0;
            for (int64_t q0 = 0; q0 < p.hw; q0 += kMeanChunk) {
                const int64_t q1 = lesser(p.hw, q0 + kMeanChunk);
                switch (vectors) {
                    case 1: sum_pixels<kBf16, 1>(p.src, at, p.c, q0, q1, tail, total); break;
                    case 2: sum_pixels<kBf16, 2>(p.src, at, p.c, q0, q1, tail, total); break;
                    case 3: sum_pixels<kBf16, 3>(p.src, at, p.c, q0, q1, tail, total); break;
                    default: sum_pixels<kBf16, 4>(p.src, at, p.c, q0, q1, tail, total); break;
                }
            }
            for (int64_t v = 0; v < vectors; ++v)
                store<kBf16>(p.dst, image * p.c + c0 + v * kLanes, v == vectors - 1 ? tail : __mmask16(0xffff),
                             _mm512_div_ps(total[v], count));
        }
    });
}

// One task per chunk of pixels; in it, each pixel's output row written in order, input after
// input (faster than walking each input over the chunk: 7.3 against 8.7 ms for DenseNet-121's
// 62 norms at batch 4, bf16).
constexpr int64_t kScaleShiftChunk = 32;

template <bool kBf16, bool kRelu>
void scale_shift_typed(const ScaleShift &p) {
    int64_t total = 0;
    for (int64_t i = 0; i < p.inputs; ++i) total += p.channels[i];
    const __m512 zero = _mm512_setzero_ps();
    at::parallel_for(0, (p.pixels + kScaleShiftChunk - 1) / kScaleShiftChunk, 1, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
            const int64_t q0 = task * kScaleShiftChunk, q1 = lesser(p.pixels, q0 + kScaleShiftChunk);
            for (int64_t q = q0; q < q1; ++q) {
                int64_t offset = 0;
                for (int64_t i = 0; i < p.inputs; ++i) {
                    const int64_t c = p.channels[i], full = c / kLanes * kLanes;
                    const int64_t from = q * c, to = q * total + offset;
                    auto one = [&](int64_t j, __mmask16 m) {
                        __m512 v = _mm512_fmadd_ps(load<kBf16>(p.src[i], from + j, m),
                                                   _mm512_maskz_loadu_ps(m, p.scale + offset + j),
                                                   _mm512_maskz_loadu_ps(m, p.shift + offset + j));
                        if constexpr (kRelu) v = _mm512_max_ps(zero, v);  // NaN (second operand) stays NaN
                        store<kBf16>(p.dst, to + j, m, v);
                    };
                    for (int64_t j = 0; j < full; j += kLanes) one(j, __mmask16(0xffff));
                    if (full < c) one(full, tail_mask(c - full));
                    offset += c;
                }
            }
        }
    });
}

}  // namespace

void run_scale_shift(const ScaleShift &p) {
    if (p.bf16) {
        if (p.relu) scale_shift_typed<true, true>(p); else scale_shift_typed<true, false>(p);
    } else {
        if (p.relu) scale_shift_typed<false, true>(p); else scale_shift_typed<false, false>(p);
    }
}

void run_spatial_mean(const SpatialMean &p) {
    if (p.bf16) spatial_mean_typed<true>(p); else spatial_mean_typed<false>(p);
}

void run_pointwise(const Pointwise &p) {
    if (p.bf16) pointwise_typed<true>(p); else pointwise_typed<false>(p);
}

void run_post_ops(const Problem &p, void *data, int64_t n) {
    if (p.bf16_out) post_ops_in_place<true>(p, data, n); else post_ops_in_place<false>(p, data, n);
}

void run(const Problem &p) {
    if (p.bf16_in) {
        if (p.bf16_out) run_vectors<true, true>(p); else run_vectors<true, false>(p);
    } else {
        if (p.bf16_out) run_vectors<false, true>(p); else run_vectors<false, false>(p);
    }
}

}  // namespace ipex::ops::own_kernels
