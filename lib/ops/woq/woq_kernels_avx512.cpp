// AVX-512 kernels of ipex::woq_linear. This file is compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512bf16 -mavx512vnni -mfma; callers check isa::avx512() and friends
// first. It includes no libtorch header, so no inline library code is built with these flags.
//
// Batch-1 decode reads each weight once: int4 nibbles are widened and converted in
// registers, four output channels share every activation load, the per-group dot products
// are scaled once per group, and the zero points are folded in through the group sums of x:
//   y[n] = sum_g s[n,g] * (sum_{k in g} q[n,k] x[k] - z[n,g] * sum_{k in g} x[k]).
// The fp32 kernels and the int8 GEMV are woq_kernels_lanes.h's, on the 512-bit lanes below
// (VNNI for the int8 dot); the bf16 kernels are this file's own.
#include <immintrin.h>

#include "kernels/avx512/math.h"
#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_kernels_lanes.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq::kernels {
namespace {

// The 32 weights of one block as 32 unsigned bytes in channel order.
template <int kBits>
inline __m256i load_block_u8(const uint8_t *src) {
    if constexpr (kBits == 4) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
        const __m128i mask = _mm_set1_epi8(0x0f);
        const __m128i lo = _mm_and_si128(b, mask);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
        return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    } else {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src));
    }
}

// 512-bit lanes for the kernels written once in woq_kernels_lanes.h.
struct Lanes {
    using V = __m512;
    static constexpr int kLanes = 16;
    static constexpr int kGemmRows = kRows;  // 16 accumulators, 8 weight vectors of 32 registers
    static V zero() { return _mm512_setzero_ps(); }
    static V set1(float f) { return _mm512_set1_ps(f); }
    static V load(const float *p) { return _mm512_loadu_ps(p); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static float sum(V v) { return _mm512_reduce_add_ps(v); }
    // A full vector takes a plain store: a masked one costs several times more on AMD Zen 4/5.
    static void store_first(float *dst, V v, int64_t n) {
        if (n >= kLanes) _mm512_storeu_ps(dst, v);
        else _mm512_mask_storeu_ps(dst, ::ipex::kernels::avx512::tail_mask(n), v);
    }
    // The 32 weights of one block as two vectors of 16 floats (channels 0-15 and 16-31).
    template <int kBits>
    static void load_block(const uint8_t *src, V v[2]) {
        if constexpr (kBits == 4) {
            const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src)));
            v[0] = _mm512_cvtepi32_ps(_mm512_and_si512(q, _mm512_set1_epi32(0x0f)));
            v[1] = _mm512_cvtepi32_ps(_mm512_srli_epi32(q, 4));
        } else {
            v[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src))));
            v[1] = _mm512_cvtepi32_ps(
                _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 16))));
        }
    }
    // VNNI: unsigned weights times signed activations, four products to a 32-bit lane.
    template <int kBits>
    static __m256i dot_s8(__m256i acc, const uint8_t *src, __m256i x) {
        return _mm256_dpbusd_epi32(acc, load_block_u8<kBits>(src), x);
    }
};

// bf16 values of 0..15 (entries 16..31 repeat them), the lookup for int4 nibbles.
alignas(64) constexpr uint16_t kBf16OfNibble[32] = {
    0x0000, 0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0, 0x40e0, 0x4100, 0x4110, 0x4120,
    0x4130, 0x4140, 0x4150, 0x4160, 0x4170, 0x0000, 0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0,
    0x40c0, 0x40e0, 0x4100, 0x4110, 0x4120, 0x4130, 0x4140, 0x4150, 0x4160, 0x4170};

template <int kR>
void gemv_bf16_rows(const WeightView &w, const GemvBF16 &a, int64_t n) {
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w);
    const __m512i lut = _mm512_load_si512(kBf16OfNibble);
    const __m128i mask = _mm_set1_epi8(0x0f);
    const uint8_t *rows[kR];
    for (int r = 0; r < kR; ++r) rows[r] = w.qweight + (n + r) * rb;
    for (int64_t m = 0; m < a.m; ++m) {
        const uint16_t *x = a.x + m * w.kp;
        const float *xsum = a.xsum + m * w.groups;
        __m512 acc[kR];
        float corr[kR];
        for (int r = 0; r < kR; ++r) {
            acc[r] = _mm512_setzero_ps();
            corr[r] = 0.f;
        }
        for (int64_t g = 0; g < w.groups; ++g) {
            __m512 ga[kR];
            for (int r = 0; r < kR; ++r) ga[r] = _mm512_setzero_ps();
            for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
                const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + b * kBlock);
                if (m == 0) prefetch_next_tile<kR>(rows, rb, b * (kBlock / 2));
                for (int r = 0; r < kR; ++r) {
                    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(rows[r] + b * (kBlock / 2)));
                    const __m128i lo = _mm_and_si128(bytes, mask);
                    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
                    const __m512i idx = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
                    const __m512bh wv = (__m512bh)_mm512_permutexvar_epi16(idx, lut);
                    ga[r] = _mm512_dpbf16_ps(ga[r], wv, xv);
                }
            }
            for (int r = 0; r < kR; ++r) {
                const float s = w.scales[(n + r) * w.groups + g];
                acc[r] = _mm512_fmadd_ps(ga[r], _mm512_set1_ps(s), acc[r]);
                corr[r] += s * w.zeros[(n + r) * w.groups + g] * xsum[g];
            }
        }
        for (int r = 0; r < kR; ++r) a.out[m * a.ldo + n + r] = _mm512_reduce_add_ps(acc[r]) - corr[r];
    }
}

// Two blocks per step in pair order (woq_kernels.h): the nibbles of both blocks are spread
// over one 512-bit register and unpacked bytewise against 0x43, which makes bf16 words of
// value 128 + q (exact), so no lookup is needed; the 128 * sum(x) this adds is taken off with
// the zero point: y = s * (dot - (zero + 128) * sum(x)). kM rows of x share each unpacked pair.
template <int kR, int kM>
void gemv_bf16_pair_tile(const WeightView &w, const GemvBF16 &a, int64_t n, int64_t m0) {
    constexpr float kBias = 128.f;
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w);
    const __m256i mask = _mm256_set1_epi8(0x0f);
    const __m512i high = _mm512_set1_epi8(0x43);
    const uint8_t *rows[kR];
    for (int r = 0; r < kR; ++r) rows[r] = w.qweight + (n + r) * rb;
    __m512 acc[kR][kM];
    float corr[kR][kM];
    for (int r = 0; r < kR; ++r)
        for (int i = 0; i < kM; ++i) {
            acc[r][i] = _mm512_setzero_ps();
            corr[r][i] = 0.f;
        }
    for (int64_t g = 0; g < w.groups; ++g) {
        __m512 ga[kR][kM];
        for (int r = 0; r < kR; ++r)
            for (int i = 0; i < kM; ++i) ga[r][i] = _mm512_setzero_ps();
        for (int64_t b = g * bpg; b < (g + 1) * bpg; b += 2) {
            __m512bh x0[kM], x1[kM];
            for (int i = 0; i < kM; ++i) {
                const uint16_t *x = a.x + (m0 + i) * w.kp + b * kBlock;
                x0[i] = (__m512bh)_mm512_loadu_si512(x);
                x1[i] = (__m512bh)_mm512_loadu_si512(x + kBlock);
            }
            if (m0 == 0) prefetch_next_tile<kR>(rows, rb, b * (kBlock / 2));
            for (int r = 0; r < kR; ++r) {
                const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(rows[r] + b * (kBlock / 2)));
                const __m256i lo = _mm256_and_si256(bytes, mask);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
                const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                const __m512bh u0 = (__m512bh)_mm512_unpacklo_epi8(both, high);
                const __m512bh u1 = (__m512bh)_mm512_unpackhi_epi8(both, high);
                for (int i = 0; i < kM; ++i) {
                    ga[r][i] = _mm512_dpbf16_ps(ga[r][i], u0, x0[i]);
                    ga[r][i] = _mm512_dpbf16_ps(ga[r][i], u1, x1[i]);
                }
            }
        }
        for (int r = 0; r < kR; ++r) {
            const float s = w.scales[(n + r) * w.groups + g];
            const float sz = s * (w.zeros[(n + r) * w.groups + g] + kBias);
            for (int i = 0; i < kM; ++i) {
                acc[r][i] = _mm512_fmadd_ps(ga[r][i], _mm512_set1_ps(s), acc[r][i]);
                corr[r][i] += sz * a.xsum[(m0 + i) * w.groups + g];
            }
        }
    }
    for (int r = 0; r < kR; ++r)
        for (int i = 0; i < kM; ++i) a.out[(m0 + i) * a.ldo + n + r] = _mm512_reduce_add_ps(acc[r][i]) - corr[r][i];
}

// Rows of x several at a time, so each unpacked weight pair serves all of them (with two
// weight rows per tile then, to stay within the 32 vector registers).
template <int kR>
void gemv_bf16_pair_rows(const WeightView &w, const GemvBF16 &a, int64_t n) {
    int64_t m = 0;
    if constexpr (kR <= 2)
        for (; m + 4 <= a.m; m += 4) gemv_bf16_pair_tile<kR, 4>(w, a, n, m);
    for (; m + 2 <= a.m; m += 2) gemv_bf16_pair_tile<kR, 2>(w, a, n, m);
    if (m < a.m) gemv_bf16_pair_tile<kR, 1>(w, a, n, m);
}

}  // namespace

void gemv_f32_avx512(const WeightView &w, const GemvF32 &a, int64_t n_begin, int64_t n_end) {
    gemv_f32<Lanes>(w, a, n_begin, n_end);
}

void gemv_bf16_avx512(const WeightView &w, const GemvBF16 &a, int64_t n_begin, int64_t n_end) {
    int64_t n = n_begin;
    if (a.paired && a.m >= 4) {
        for (; n + 2 <= n_end; n += 2) gemv_bf16_pair_rows<2>(w, a, n);
        for (; n < n_end; ++n) gemv_bf16_pair_rows<1>(w, a, n);
        return;
    }
    if (a.paired) {
        for (; n + kRows <= n_end; n += kRows) gemv_bf16_pair_rows<kRows>(w, a, n);
        for (; n < n_end; ++n) gemv_bf16_pair_rows<1>(w, a, n);
        return;
    }
    for (; n + kRows <= n_end; n += kRows) gemv_bf16_rows<kRows>(w, a, n);
    for (; n < n_end; ++n) gemv_bf16_rows<1>(w, a, n);
}

void gemv_s8_avx512vnni(const WeightView &w, const GemvS8 &a, int64_t n_begin, int64_t n_end) {
    if (w.bits == 4) gemv_s8_range<Lanes, 4>(w, a, n_begin, n_end);
    else gemv_s8_range<Lanes, 8>(w, a, n_begin, n_end);
}

// Heap scratch for one padded row (raw new/delete: no inline library templates in this file).
struct Scratch {
    explicit Scratch(int64_t n) : data(new float[n]) {}
    ~Scratch() { delete[] data; }
    float *data;
};

void dequant_f32_avx512(const WeightView &w, float *dst, int64_t ld, int64_t n_begin, int64_t n_end) {
    dequant_f32<Lanes>(w, dst, ld, n_begin, n_end);
}

// int4 rows to bf16 through a per-group table: entry i = bf16((i - zero) * scale), so each
// block of 32 weights is one lookup (VPERMW) of its nibbles. Same rounding as converting the
// fp32 product: the table entries are those products rounded to nearest even.
static void dequant_bf16_int4_row(const WeightView &w, int64_t n, uint16_t *dst) {
    const int64_t bpg = blocks_per_group(w);
    const uint8_t *row = w.qweight + n * w.row_bytes();
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t g = 0; g < w.groups; ++g) {
        const __m512 v = _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps(w.zeros[n * w.groups + g])),
                                       _mm512_set1_ps(w.scales[n * w.groups + g]));
        const __m256i half = ::ipex::kernels::avx512::fp32_to_bf16(v);
        const __m512i lut = _mm512_inserti64x4(_mm512_castsi256_si512(half), half, 1);
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + b * (kBlock / 2)));
            const __m128i lo = _mm_and_si128(bytes, mask);
            const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
            const __m512i idx = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
            const __m512i out = _mm512_permutexvar_epi16(idx, lut);
            const int64_t k0 = b * kBlock;
            if (k0 + kBlock <= w.k) {
                _mm512_storeu_si512(dst + k0, out);
            } else if (k0 < w.k) {
                const __mmask32 keep = static_cast<__mmask32>((uint64_t(1) << (w.k - k0)) - 1);
                _mm512_mask_storeu_epi16(dst + k0, keep, out);
            }
        }
    }
}

void dequant_bf16_avx512(const WeightView &w, uint16_t *dst, int64_t ld, int64_t n_begin, int64_t n_end) {
    if (w.bits == 4) {
        for (int64_t n = n_begin; n < n_end; ++n) dequant_bf16_int4_row(w, n, dst + (n - n_begin) * ld);
        return;
    }
    Scratch tmp(w.kp);
    for (int64_t n = n_begin; n < n_end; ++n) {
        dequant_row<Lanes, 8>(w, n, tmp.data);
        uint16_t *row = dst + (n - n_begin) * ld;
        int64_t k = 0;
        for (; k + 16 <= w.k; k += 16) {
            const __m256i v = ::ipex::kernels::avx512::fp32_to_bf16(_mm512_loadu_ps(tmp.data + k));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(row + k), v);
        }
        if (k < w.k) {
            const __mmask16 mask = static_cast<__mmask16>((1u << (w.k - k)) - 1);
            const __m256i v =
                ::ipex::kernels::avx512::fp32_to_bf16(_mm512_maskz_loadu_ps(mask, tmp.data + k));
            _mm256_mask_storeu_epi16(row + k, mask, v);
        }
    }
}

}  // namespace ipex::woq::kernels
