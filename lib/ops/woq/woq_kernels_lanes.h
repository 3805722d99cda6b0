// The kernels of ipex::woq_linear that are one algorithm at any vector width, written once
// over a lane type: fp32 activations (batch-1 GEMV, small-batch GEMM tiles, dequantize) and
// the int8-activation GEMV. woq_kernels_avx2.cpp and woq_kernels_avx512.cpp each define a
// `Lanes` struct (the vector type, its width and the few operations the kernels use) and
// instantiate these templates with it.
//
// Everything here sits in an unnamed namespace on purpose: each including file keeps its own
// copy, built with its own ISA flags, so an AVX-512 instance can never be linked in where
// the AVX2 one is called (the rule kernels/avx512/math.h keeps with `static`). Include this
// header only from files built by ipex_isa_sources().
//
// The algebra (the same in every kernel of this folder):
//   y[n] = sum_g s[n,g] * (sum_{k in g} q[n,k] x[k] - z[n,g] * sum_{k in g} x[k]),
// weights widened in registers, each group's dot product scaled once, the zero points
// entering through the group sums of x.
//
// A Lanes struct provides:
//   using V;  static constexpr int kLanes;      fp32 vector and its width (kBlock % kLanes == 0)
//   static constexpr int kGemmRows;            weight rows of a GEMM tile (4 x kGemmRows
//                                              accumulators plus kGemmRows x kBlock/kLanes
//                                              weight vectors fit the register file)
//   zero(), set1(f), load(p), add/mul/sub(a, b), fmadd(a, b, c), sum(v)
//   store_first(dst, v, n)                     the first n <= kLanes lanes of v
//   load_block<kBits>(src, V v[kBlock / kLanes])  one block's 32 weights in channel order
//   dot_s8<kBits>(acc, src, x)                 acc (8 x int32) + the block's 32 unsigned
//                                              weights times 32 int8 activations x
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq::kernels {
namespace {  // NOLINT(google-build-namespaces): one copy per ISA file, see above

constexpr int kRows = 4;  // output channels per step of the GEMV kernels
// Software prefetch: while a tile of kRows weight rows is read, the same positions of a tile
// further on are fetched (every byte once); with several short rows read side by side the
// hardware prefetchers fall behind. Tiles ahead: measured on Zen 4, 1 tile leaves the 2 KiB
// rows of 4096 input channels at ~9 GB/s, 3-4 tiles reach 12-17 GB/s on one core.
constexpr int64_t kPrefetchTiles = 4;

// Prefetches, for each of the kR rows, the byte `offset` of the row kPrefetchTiles tiles
// further on (once per 64-byte line).
template <int kR>
inline void prefetch_next_tile(const uint8_t *const *rows, int64_t row_bytes, int64_t offset) {
    if (offset % 64 != 0) return;
    for (int r = 0; r < kR; ++r)
        _mm_prefetch(reinterpret_cast<const char *>(rows[r] + offset + kPrefetchTiles * kR * row_bytes), _MM_HINT_T0);
}

inline int64_t blocks_per_group(const WeightView &w) { return (w.groups == 1 ? w.kp : w.group_size) / kBlock; }
inline int64_t block_bytes(const WeightView &w) { return w.bits == 4 ? kBlock / 2 : kBlock; }

// The sum of 8 fp32 lanes.
inline float hsum256(__m256 v) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

// Batch 1, fp32 activations: kR weight rows share each activation load; one accumulator
// chain per row hides the FMA latency.
template <typename L, int kBits, int kR>
void gemv_f32_rows(const WeightView &w, const GemvF32 &a, int64_t n) {
    using V = typename L::V;
    constexpr int kVecs = kBlock / L::kLanes;
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w), bb = block_bytes(w);
    const uint8_t *rows[kR];
    for (int r = 0; r < kR; ++r) rows[r] = w.qweight + (n + r) * rb;
    V acc[kR];
    float corr[kR];
    for (int r = 0; r < kR; ++r) {
        acc[r] = L::zero();
        corr[r] = 0.f;
    }
    for (int64_t g = 0; g < w.groups; ++g) {
        V ga[kR];
        for (int r = 0; r < kR; ++r) ga[r] = L::zero();
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            V xv[kVecs];
            for (int j = 0; j < kVecs; ++j) xv[j] = L::load(a.x + b * kBlock + j * L::kLanes);
            prefetch_next_tile<kR>(rows, rb, b * bb);
            for (int r = 0; r < kR; ++r) {
                V v[kVecs];
                L::template load_block<kBits>(rows[r] + b * bb, v);
                for (int j = 0; j < kVecs; ++j) ga[r] = L::fmadd(v[j], xv[j], ga[r]);
            }
        }
        for (int r = 0; r < kR; ++r) {
            const float s = w.scales[(n + r) * w.groups + g];
            acc[r] = L::fmadd(ga[r], L::set1(s), acc[r]);
            corr[r] += s * w.zeros[(n + r) * w.groups + g] * a.xsum[g];
        }
    }
    for (int r = 0; r < kR; ++r) a.out[n + r] = L::sum(acc[r]) - corr[r];
}

// kR weight rows x kM activation rows: each weight block is converted and scaled once and
// used for kM rows of x.
template <typename L, int kBits, int kR, int kM>
void gemm_f32_tile(const WeightView &w, const GemvF32 &a, int64_t n, int64_t m0) {
    using V = typename L::V;
    constexpr int kVecs = kBlock / L::kLanes;
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w), bb = block_bytes(w);
    V acc[kR][kM];
    float corr[kR][kM];
    for (int r = 0; r < kR; ++r)
        for (int i = 0; i < kM; ++i) {
            acc[r][i] = L::zero();
            corr[r][i] = 0.f;
        }
    for (int64_t g = 0; g < w.groups; ++g) {
        V sv[kR];
        for (int r = 0; r < kR; ++r) {
            const float s = w.scales[(n + r) * w.groups + g];
            const float sz = s * w.zeros[(n + r) * w.groups + g];
            sv[r] = L::set1(s);
            for (int i = 0; i < kM; ++i) corr[r][i] += sz * a.xsum[(m0 + i) * w.groups + g];
        }
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            V v[kR][kVecs];
            for (int r = 0; r < kR; ++r) {
                L::template load_block<kBits>(w.qweight + (n + r) * rb + b * bb, v[r]);
                for (int j = 0; j < kVecs; ++j) v[r][j] = L::mul(v[r][j], sv[r]);
            }
            for (int i = 0; i < kM; ++i) {
                const float *x = a.x + (m0 + i) * w.kp + b * kBlock;
                V xv[kVecs];
                for (int j = 0; j < kVecs; ++j) xv[j] = L::load(x + j * L::kLanes);
                for (int r = 0; r < kR; ++r)
                    for (int j = 0; j < kVecs; ++j) acc[r][i] = L::fmadd(v[r][j], xv[j], acc[r][i]);
            }
        }
    }
    for (int r = 0; r < kR; ++r)
        for (int i = 0; i < kM; ++i) a.out[(m0 + i) * a.ldo + n + r] = L::sum(acc[r][i]) - corr[r][i];
}

template <typename L, int kBits, int kR>
void gemm_f32_rows(const WeightView &w, const GemvF32 &a, int64_t n) {
    constexpr int kTileM = 4;
    int64_t m = 0;
    for (; m + kTileM <= a.m; m += kTileM) gemm_f32_tile<L, kBits, kR, kTileM>(w, a, n, m);
    switch (a.m - m) {
    case 3: gemm_f32_tile<L, kBits, kR, 3>(w, a, n, m); break;
    case 2: gemm_f32_tile<L, kBits, kR, 2>(w, a, n, m); break;
    case 1: gemm_f32_tile<L, kBits, kR, 1>(w, a, n, m); break;
    default: break;
    }
}

// Output channels [n0, n1) for every row of x: the GEMV at batch 1, tiles of L::kGemmRows
// weight rows by four rows of x above it.
template <typename L, int kBits>
void gemv_f32_range(const WeightView &w, const GemvF32 &a, int64_t n0, int64_t n1) {
    int64_t n = n0;
    if (a.m == 1) {
        for (; n + kRows <= n1; n += kRows) gemv_f32_rows<L, kBits, kRows>(w, a, n);
        for (; n < n1; ++n) gemv_f32_rows<L, kBits, 1>(w, a, n);
        return;
    }
    for (; n + L::kGemmRows <= n1; n += L::kGemmRows) gemm_f32_rows<L, kBits, L::kGemmRows>(w, a, n);
    for (; n < n1; ++n) gemm_f32_rows<L, kBits, 1>(w, a, n);
}

template <typename L>
void gemv_f32(const WeightView &w, const GemvF32 &a, int64_t n_begin, int64_t n_end) {
    if (w.bits == 4) gemv_f32_range<L, 4>(w, a, n_begin, n_end);
    else gemv_f32_range<L, 8>(w, a, n_begin, n_end);
}

// int8 activations, any group size: kR weight rows per step, each row of x in turn (the
// weights prefetched on the first); 32-bit sums per group, scaled once per group.
template <typename L, int kBits, int kR>
void gemv_s8_rows(const WeightView &w, const GemvS8 &a, int64_t n) {
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w), bb = block_bytes(w);
    const uint8_t *rows[kR];
    for (int r = 0; r < kR; ++r) rows[r] = w.qweight + (n + r) * rb;
    for (int64_t m = 0; m < a.m; ++m) {
        const int8_t *x = a.xq + m * w.kp;
        const int32_t *xsum = a.xsum + m * w.groups;
        __m256 acc[kR];
        float corr[kR];
        for (int r = 0; r < kR; ++r) {
            acc[r] = _mm256_setzero_ps();
            corr[r] = 0.f;
        }
        for (int64_t g = 0; g < w.groups; ++g) {
            __m256i ga[kR];
            for (int r = 0; r < kR; ++r) ga[r] = _mm256_setzero_si256();
            for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
                const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + b * kBlock));
                if (m == 0) prefetch_next_tile<kR>(rows, rb, b * bb);
                for (int r = 0; r < kR; ++r) ga[r] = L::template dot_s8<kBits>(ga[r], rows[r] + b * bb, xv);
            }
            for (int r = 0; r < kR; ++r) {
                const float s = w.scales[(n + r) * w.groups + g];
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ga[r]), _mm256_set1_ps(s), acc[r]);
                corr[r] += s * w.zeros[(n + r) * w.groups + g] * static_cast<float>(xsum[g]);
            }
        }
        for (int r = 0; r < kR; ++r) a.out[m * a.ldo + n + r] = (hsum256(acc[r]) - corr[r]) * a.xscale[m];
    }
}

template <typename L, int kBits>
void gemv_s8_range(const WeightView &w, const GemvS8 &a, int64_t n0, int64_t n1) {
    int64_t n = n0;
    for (; n + kRows <= n1; n += kRows) gemv_s8_rows<L, kBits, kRows>(w, a, n);
    for (; n < n1; ++n) gemv_s8_rows<L, kBits, 1>(w, a, n);
}

// One dequantized row as fp32, its first w.k channels (the padding channels are not written).
template <typename L, int kBits>
void dequant_row(const WeightView &w, int64_t n, float *dst) {
    using V = typename L::V;
    constexpr int kVecs = kBlock / L::kLanes;
    const int64_t bpg = blocks_per_group(w), bb = block_bytes(w);
    const uint8_t *row = w.qweight + n * w.row_bytes();
    for (int64_t g = 0; g < w.groups; ++g) {
        const V s = L::set1(w.scales[n * w.groups + g]);
        const V z = L::set1(w.zeros[n * w.groups + g]);
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            V v[kVecs];
            L::template load_block<kBits>(row + b * bb, v);
            for (int j = 0; j < kVecs; ++j) {
                const int64_t k0 = b * kBlock + j * L::kLanes;
                if (k0 >= w.k) break;
                L::store_first(dst + k0, L::mul(L::sub(v[j], z), s), w.k - k0);
            }
        }
    }
}

template <typename L>
void dequant_f32(const WeightView &w, float *dst, int64_t ld, int64_t n_begin, int64_t n_end) {
    for (int64_t n = n_begin; n < n_end; ++n) {
        if (w.bits == 4) dequant_row<L, 4>(w, n, dst + (n - n_begin) * ld);
        else dequant_row<L, 8>(w, n, dst + (n - n_begin) * ld);
    }
}

}  // namespace
}  // namespace ipex::woq::kernels
