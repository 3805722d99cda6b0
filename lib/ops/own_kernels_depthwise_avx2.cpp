// The own depthwise convolution kernel's AVX2 + FMA build, fp32 only (own_kernels.h: run on
// CPUs without AVX-512): the AVX-512 build's walk with 8-lane vectors. Each output row (image,
// output y) is one task, its channels in passes of 16 (two vectors) and then one pass of the
// rest (run_rows). Along the row, output pixels go in blocks of 6 (two channel vectors: 12
// sums and the two input vectors take 14 of the 16 ymm registers, the weights are memory
// operands) or 8 (one vector, the kernel row's weights in registers), then 4, 2 and 1. For the
// common kernels (3, 5 or 7 wide, stride 1 or 2, dilation 1) each input column of a kernel row
// is loaded once and added into every output pixel of the block it reaches (span_block); a
// block whose columns leave the image skips those columns. The weight is read in 16-channel
// blocks of every tap (Problem::weight_blocks), the post-ops run over the finished row in the
// first-level cache, one pass each, and a channel tail is read and written with VMASKMOVPS, so
// no lane past the tensor is touched. Built with -mavx2 -mfma; runs only after
// own_kernels::depthwise_available(false).
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cstdint>

#include "ops/own_kernels_avx2.h"
#include "ops/own_kernels_depthwise.h"

namespace ipex::ops::own_kernels {
namespace {

constexpr int kLanes = 8;

inline int64_t greater(int64_t a, int64_t b) { return a > b ? a : b; }

template <bool kMasked>
inline __m256 load(const float *at, __m256i m) {
    if constexpr (kMasked) return _mm256_maskload_ps(at, m);
    return _mm256_loadu_ps(at);
}

template <bool kMasked>
inline void store(float *at, __m256i m, __m256 v) {
    if constexpr (kMasked) _mm256_maskstore_ps(at, m, v);
    else _mm256_storeu_ps(at, v);
}

// The pass's masks (all lanes but in a tail pass's last vector) and every sum of the block set
// to its channel's bias.
template <int kBlock, int kVectors, bool kMasked>
inline void start_block(const Problem &p, int64_t c0, __m256i (&m)[kVectors], __m256 (&acc)[kBlock][kVectors]) {
    for (int v = 0; v < kVectors; ++v) {
        m[v] = lanes_below(p.c, c0 + v * kLanes);
        const __m256 b = p.bias ? load<kMasked>(p.bias + c0 + v * kLanes, m[v]) : _mm256_setzero_ps();
        for (int j = 0; j < kBlock; ++j) acc[j][v] = b;
    }
}

template <int kBlock, int kVectors, bool kMasked>
inline void store_block(const Problem &p, const __m256i (&m)[kVectors], __m256 (&acc)[kBlock][kVectors], int64_t out,
                        int64_t c0) {
    auto *dst = static_cast<float *>(p.dst);
    for (int j = 0; j < kBlock; ++j)
        for (int v = 0; v < kVectors; ++v) store<kMasked>(dst + out + j * p.c + c0 + v * kLanes, m[v], acc[j][v]);
}

// The pass's weight for channels c0 ..: Problem::weight_blocks, whose 16-channel block holds
// every tap of its channels, tap (kh, kw) at + (kh * p.kw + kw) * 16.
inline const float *weight_at(const Problem &p, int64_t c0) {
    return p.weight_blocks + (c0 / 16) * p.kh * p.kw * 16 + c0 % 16;
}

// Output pixels [ow, ow + kBlock) of one row, the pass's channels kVectors vectors at a time,
// each tap's weight in registers. kEdge: test each tap's column. Any kernel size, stride and
// dilation.
template <int kBlock, int kVectors, bool kMasked, bool kEdge>
void block(const Problem &p, const Row &r, int64_t ow) {
    const int64_t c = p.c;
    const int64_t ih0 = r.oh * p.stride_h - p.pad_h;
    const int64_t iw0 = ow * p.stride_w - p.pad_w;
    const int64_t out = ((r.n * p.oh + r.oh) * p.ow + ow) * c;
    const auto *src = static_cast<const float *>(p.src);
    for (int64_t c0 = r.c_lo; c0 < r.c_hi; c0 += kVectors * kLanes) {
        __m256i m[kVectors];
        __m256 acc[kBlock][kVectors];
        start_block<kBlock, kVectors, kMasked>(p, c0, m, acc);
        const float *weight = weight_at(p, c0);
        for (int64_t kh = r.kh_lo; kh < r.kh_hi; ++kh) {
            const int64_t in_row = (r.n * p.ih + ih0 + kh * p.dilation_h) * p.iw;
            for (int64_t kw = 0; kw < p.kw; ++kw) {
                const float *wp = weight + (kh * p.kw + kw) * 16;
                __m256 w[kVectors];
                for (int v = 0; v < kVectors; ++v) w[v] = _mm256_loadu_ps(wp + v * kLanes);
                const int64_t col = iw0 + kw * p.dilation_w;
                for (int j = 0; j < kBlock; ++j) {
                    const int64_t iw = col + j * p.stride_w;
                    if (kEdge && (iw < 0 || iw >= p.iw)) continue;
                    const float *x = src + (in_row + iw) * c + c0;
                    for (int v = 0; v < kVectors; ++v)
                        acc[j][v] = _mm256_fmadd_ps(load<kMasked>(x + v * kLanes, m[v]), w[v], acc[j][v]);
                }
            }
        }
        store_block<kBlock, kVectors, kMasked>(p, m, acc, out, c0);
    }
}

// A block for kernel width kKw, stride kStride, dilation 1 along the width (its first lines
// repeat block's: sharing them through an inlined lambda made GCC keep the masked one-vector
// pass's sums on the stack): each input column
// of a kernel row is loaded once and added into every output pixel it reaches, the weights read
// as memory operands at fixed offsets; edge: columns outside the image are skipped (one test
// per column, the padding's zeros adding nothing). One pointer walks the columns and the
// weight pointer is opaque to the compiler at each column: otherwise GCC keeps every tap's
// weight in registers across the columns, and with 16 of them the sums go to the stack.
template <int kBlock, int kVectors, bool kMasked, int kKw, int kStride>
void span_block(const Problem &p, const Row &r, int64_t ow, bool edge) {
    constexpr int kSpan = (kBlock - 1) * kStride + kKw;
    const int64_t c = p.c;
    const int64_t ih0 = r.oh * p.stride_h - p.pad_h;
    const int64_t iw0 = ow * kStride - p.pad_w;
    const int64_t out = ((r.n * p.oh + r.oh) * p.ow + ow) * c;
    const auto *src = static_cast<const float *>(p.src);
    for (int64_t c0 = r.c_lo; c0 < r.c_hi; c0 += kVectors * kLanes) {
        __m256i m[kVectors];
        __m256 acc[kBlock][kVectors];
        start_block<kBlock, kVectors, kMasked>(p, c0, m, acc);
        const float *weight = weight_at(p, c0);
        for (int64_t kh = r.kh_lo; kh < r.kh_hi; ++kh) {
            const float *in = src + ((r.n * p.ih + ih0 + kh * p.dilation_h) * p.iw + iw0) * c + c0;
            const float *wrow = weight + kh * kKw * 16;
            // One vector: the row's kKw weights stay in registers (kBlock + kKw + 1 of 16).
            __m256 w[kVectors == 1 ? kKw : 1];
            if constexpr (kVectors == 1)
                for (int kw = 0; kw < kKw; ++kw) w[kw] = _mm256_loadu_ps(wrow + kw * 16);
#pragma GCC unroll 32
            for (int i = 0; i < kSpan; ++i, in += c) {
                if (edge && static_cast<uint64_t>(iw0 + i) >= static_cast<uint64_t>(p.iw)) continue;
                __m256 x[kVectors];
                for (int v = 0; v < kVectors; ++v) x[v] = load<kMasked>(in + v * kLanes, m[v]);
                asm("" : "+r"(wrow), "+r"(in));
#pragma GCC unroll 8
                for (int kw = 0; kw < kKw; ++kw) {
                    const int d = i - kw;  // = j * kStride for the output pixel j this tap adds to
                    if (d < 0 || d % kStride != 0 || d / kStride >= kBlock) continue;
                    const int j = d / kStride;
                    if constexpr (kVectors == 1) {
                        acc[j][0] = _mm256_fmadd_ps(x[0], w[kw], acc[j][0]);
                    } else {
                        for (int v = 0; v < kVectors; ++v)
                            acc[j][v] = _mm256_fmadd_ps(x[v], _mm256_loadu_ps(wrow + kw * 16 + v * kLanes), acc[j][v]);
                    }
                }
            }
        }
        store_block<kBlock, kVectors, kMasked>(p, m, acc, out, c0);
    }
}

// Whether span_block computes p: dilation 1 along the width and the kernel widths and strides
// it is built for.
bool spans(const Problem &p) {
    return p.dilation_w == 1 && ((p.stride_w == 1 && (p.kw == 3 || p.kw == 5 || p.kw == 7)) ||
                                 (p.stride_w == 2 && (p.kw == 3 || p.kw == 5)));
}

template <int kBlock, int kVectors, bool kMasked>
void span(const Problem &p, const Row &r, int64_t ow, bool edge) {
    if (p.stride_w == 1) {
        if (p.kw == 3) return span_block<kBlock, kVectors, kMasked, 3, 1>(p, r, ow, edge);
        if (p.kw == 5) return span_block<kBlock, kVectors, kMasked, 5, 1>(p, r, ow, edge);
        return span_block<kBlock, kVectors, kMasked, 7, 1>(p, r, ow, edge);
    }
    if (p.kw == 3) return span_block<kBlock, kVectors, kMasked, 3, 2>(p, r, ow, edge);
    span_block<kBlock, kVectors, kMasked, 5, 2>(p, r, ow, edge);
}

// Pixels [ow, ow + kBlock): span_block where it applies, else block.
template <int kBlock, int kVectors, bool kMasked>
void any_block(const Problem &p, const Row &r, int64_t ow, bool edge, bool spanned) {
    if (spanned) return span<kBlock, kVectors, kMasked>(p, r, ow, edge);
    if (edge) block<kBlock, kVectors, kMasked, true>(p, r, ow);
    else block<kBlock, kVectors, kMasked, false>(p, r, ow);
}

// One pass over one output row: blocks of kWide pixels from its start, then of 4 (span_block
// or block), 2 and 1 (block). A block with a column whose taps leave the image tests them:
// the first and last blocks of a padded convolution, as many sums as the others.
template <int kVectors, bool kMasked>
void run_row(const Problem &p, int64_t row, int64_t c_lo, int64_t c_hi) {
    constexpr int kWide = kVectors == 2 ? 6 : 8;
    const Row r = row_of(p, row, c_lo, c_hi);
    const Columns cols = interior_columns(p);
    const int64_t lo = cols.lo, hi = cols.hi;
    const auto edge = [&](int64_t ow, int64_t count) { return ow < lo || ow + count > hi; };

    const bool spanned = spans(p);
    int64_t ow = 0;
    for (; ow + kWide <= p.ow; ow += kWide) any_block<kWide, kVectors, kMasked>(p, r, ow, edge(ow, kWide), spanned);
    if (ow + 4 <= p.ow) {
        any_block<4, kVectors, kMasked>(p, r, ow, edge(ow, 4), spanned);
        ow += 4;
    }
    if (ow + 2 <= p.ow) {
        if (edge(ow, 2)) block<2, kVectors, kMasked, true>(p, r, ow);
        else block<2, kVectors, kMasked, false>(p, r, ow);
        ow += 2;
    }
    if (ow < p.ow) {
        if (edge(ow, 1)) block<1, kVectors, kMasked, true>(p, r, ow);
        else block<1, kVectors, kMasked, false>(p, r, ow);
    }
}

// Rows [begin, end): the channels in passes of 16 (two whole vectors), then the rest in one
// pass of one or two vectors, the last of them masked when the rest is not a whole vector.
void run_rows(const Problem &p, int64_t begin, int64_t end) {
    constexpr int64_t kPass = 2 * kLanes;
    const int64_t whole = p.c / kPass * kPass, rest = p.c - whole;
    for (int64_t row = begin; row < end; ++row) {
        if (whole > 0) run_row<2, false>(p, row, 0, whole);
        if (rest == kPass / 2) run_row<1, false>(p, row, whole, p.c);
        else if (rest > kPass / 2) run_row<2, true>(p, row, whole, p.c);
        else if (rest > 0) run_row<1, true>(p, row, whole, p.c);
        post_ops_in_place(p, static_cast<float *>(p.dst) + row * p.ow * p.c, p.ow * p.c);
    }
}

}  // namespace

void run_depthwise_avx2(const Problem &p) {
    // A row costs about ow * c * kh * kw fused multiply-adds; give a thread some 64k of them.
    const int64_t per_row = greater(1, p.ow * p.c * p.kh * p.kw);
    const int64_t grain = greater(1, 65536 / per_row);
    at::parallel_for(0, p.n * p.oh, grain, [&](int64_t begin, int64_t end) { run_rows(p, begin, end); });
}

}  // namespace ipex::ops::own_kernels
