// AVX-512 lane helpers of the kernels built for it (every *_avx512.cpp): exp of 16 fp32 lanes,
// tail masks, bf16 <-> fp32 lanes. The header sets no ISA itself: include it only from files
// built by ipex_isa_sources(avx512...) (lib/CMakeLists.txt); the bf16 rounding needs
// avx512_bf16 and exists only under it. Every function is static, so each including file keeps
// its own copy, built with its own flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ipex::kernels::avx512 {

constexpr int64_t kLanes = 16;  // fp32 lanes of a vector

// Asks for the cache lines of `values` fp32 values from `from` on: a network's input, read
// from memory a few rows before its turn (the stem kernels).
static inline void prefetch_floats(const float *from, int64_t values) {
    for (int64_t i = 0; i < values; i += kLanes) _mm_prefetch(reinterpret_cast<const char *>(from + i), _MM_HINT_T0);
}

// The first n lanes (all 16 from n >= 16 on).
static inline __mmask16 tail_mask(int64_t n) {
    return n >= kLanes ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

// exp(x) for 16 lanes: 2^n * e^f with n = round(x log2 e), |f| <= ln2 / 2, a degree-6 Taylor
// polynomial for e^f (within 2.8 ulp of exp over [-87, 0]). x at or below about -104 (-inf
// included) gives exactly 0: attention relies on it for hidden and vanishing scores. A NaN x
// gives NaN (the clamp takes x second: max returns its second operand when either is NaN), as
// std::exp does, so a NaN score makes its softmax row NaN as aten's does. x = +inf gives NaN
// (inf - inf in f): callers pass x <= 0 (scores less their max) or clamp x first (sigmoid).
static inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-120.f), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    f = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), f);
    __m512 p = _mm512_set1_ps(1.f / 720);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f / 120));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f / 24));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f / 6));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
}

// v[i] lane j becomes v[j] lane i: a 16 x 16 fp32 transpose in registers (pairs of rows
// interleaved, then 4 x 4 blocks within each 128-bit lane, then the lanes themselves).
static inline void transpose16x16(__m512 v[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    // s[4 i + c], lane L: column 4 L + c of rows 4 i .. 4 i + 3.
    __m512 s[16];
    for (int i = 0; i < 4; ++i) {
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        s[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        s[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        s[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        s[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    // Column 4 L + c gathers lane L of s[c], s[4 + c], s[8 + c], s[12 + c].
    for (int c = 0; c < 4; ++c) {
        const __m512 p = _mm512_shuffle_f32x4(s[c], s[4 + c], 0x88), q = _mm512_shuffle_f32x4(s[c], s[4 + c], 0xdd);
        const __m512 r = _mm512_shuffle_f32x4(s[8 + c], s[12 + c], 0x88);
        const __m512 u = _mm512_shuffle_f32x4(s[8 + c], s[12 + c], 0xdd);
        v[c] = _mm512_shuffle_f32x4(p, r, 0x88);
        v[8 + c] = _mm512_shuffle_f32x4(p, r, 0xdd);
        v[4 + c] = _mm512_shuffle_f32x4(q, u, 0x88);
        v[12 + c] = _mm512_shuffle_f32x4(q, u, 0xdd);
    }
}

// 16 bf16 (uint16 bits) widened to fp32, exactly: the bits become the high half.
static inline __m512 bf16_to_fp32(__m256i src) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(src), 16));
}

// The bf16 lanes of `mask` at src as fp32; the other lanes 0 (and not read).
static inline __m512 load_bf16(const uint16_t *src, __mmask16 mask) {
    return bf16_to_fp32(_mm256_maskz_loadu_epi16(mask, src));
}

#ifdef __AVX512BF16__
// 16 fp32 rounded to bf16 (nearest even, VCVTNEPS2BF16).
static inline __m256i fp32_to_bf16(__m512 src) { return (__m256i)_mm512_cvtneps_pbh(src); }

// src rounded to bf16 into the lanes of `mask` at dst. A full mask takes a plain store: a
// masked store costs several times more on some CPUs (AMD Zen 4 and 5).
static inline void store_bf16(uint16_t *dst, __mmask16 mask, __m512 src) {
    if (mask == __mmask16(0xffff))
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst), fp32_to_bf16(src));
    else
        _mm256_mask_storeu_epi16(dst, mask, fp32_to_bf16(src));
}

// src rounded to bf16 and widened back: the values a bf16 tensor would hold.
static inline __m512 round_bf16(__m512 src) { return bf16_to_fp32(fp32_to_bf16(src)); }
#endif

}  // namespace ipex::kernels::avx512
