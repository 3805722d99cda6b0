// The own depthwise convolution kernel's AVX-512 build (own_kernels.h: run). Built with AVX-512
// and AVX512-BF16 flags; runs only after own_kernels::available().
//
// Each output row (image, output y) is one task, its channels in passes of 64 and then one
// pass of the rest (run_rows). Along the row, output pixels go in blocks of up to 8 with the
// channels in vectors of 16 lanes inside: a block's 8 accumulators take every tap's weight
// vector once, and the input pixels a block reads stay in the first-level cache for the next
// channel vector. Columns whose taps all fall inside the image skip the bounds checks; only
// the few at the edges test each tap. With bf16 inputs those interior columns of stride-1
// 3x3 and 5x5 kernels run on VDPBF16PS, two kernel rows per instruction (interior_pairs).
#include <ATen/Parallel.h>
#include <immintrin.h>

#include "ops/own_kernels_avx512.h"
#include "ops/own_kernels_depthwise.h"

namespace ipex::ops::own_kernels {
namespace {

// The end of a block: the post-ops over its sums, then their stores. An fp32 output goes
// pixel by pixel (the registers of pixels stored are free for the next one's exp: 2-8%
// faster with SiLU), a bf16 one block-wide (with its shorter sigmoid, 0-10% faster than
// pixel by pixel).
template <bool kBf16Out, int kBlock, int kVectors>
inline __attribute__((always_inline)) void store_block(const Problem &p, __m512 (&acc)[kBlock][kVectors],
                                                       const __mmask16 (&m)[kVectors], int64_t out, int64_t c0) {
    if constexpr (kBf16Out) apply_block<kBf16Out, kBlock * kVectors>(p, &acc[0][0]);
    for (int j = 0; j < kBlock; ++j) {
        if constexpr (!kBf16Out) apply_block<kBf16Out, kVectors>(p, acc[j]);
        for (int v = 0; v < kVectors; ++v) store<kBf16Out>(p.dst, out + j * p.c + c0 + v * kLanes, m[v], acc[j][v]);
    }
}

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
    for (int64_t c0 = r.c_lo; c0 < r.c_hi; c0 += kVectors * kLanes) {
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
    for (int64_t c0 = r.c_lo; c0 < r.c_hi; c0 += kVectors * kLanes) {
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
    for (int64_t c0 = r.c_lo; c0 < r.c_hi; c0 += 32 * kPairs) {
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
void run_row(const Problem &p, int64_t row, int64_t c_lo, int64_t c_hi) {
    // With 4 channel vectors, 4 pixels make 16 sums; with fewer vectors, 8 pixels.
    constexpr int kWide = kVectors >= 4 ? 4 : 8;
    const Row r = row_of(p, row, c_lo, c_hi);
    const Columns cols = interior_columns(p);
    const int64_t lo = cols.lo, hi = cols.hi;

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

// The channels in passes of 64 (4 vectors), then the rest in one pass of as few vectors as
// hold it: 144 channels run as 128 + 16 rather than 3 x 64 lanes with a quarter masked off.
template <bool kBf16In, bool kBf16Out>
void run_rows(const Problem &p, int64_t begin, int64_t end) {
    constexpr int64_t kWide = 4 * kLanes;
    const int64_t whole = p.c <= 2 * kLanes ? 0 : p.c / kWide * kWide, rest = p.c - whole;
    for (int64_t row = begin; row < end; ++row) {
        if (whole > 0) run_row<kBf16In, kBf16Out, 4>(p, row, 0, whole);
        if (rest > 2 * kLanes) run_row<kBf16In, kBf16Out, 4>(p, row, whole, p.c);
        else if (rest > kLanes) run_row<kBf16In, kBf16Out, 2>(p, row, whole, p.c);
        else if (rest > 0) run_row<kBf16In, kBf16Out, 1>(p, row, whole, p.c);
    }
}

}  // namespace

void run_depthwise_avx512(const Problem &p) {
    // A row costs about ow * c * kh * kw fused multiply-adds; give a thread some 64k of them.
    const int64_t per_row = greater(1, p.ow * p.c * p.kh * p.kw);
    const int64_t grain = greater(1, 65536 / per_row);
    at::parallel_for(0, p.n * p.oh, grain, [&](int64_t begin, int64_t end) {
        if (p.bf16_in) {
            if (p.bf16_out) run_rows<true, true>(p, begin, end); else run_rows<true, false>(p, begin, end);
        } else {
            if (p.bf16_out) run_rows<false, true>(p, begin, end); else run_rows<false, false>(p, begin, end);
        }
    });
}

}  // namespace ipex::ops::own_kernels
