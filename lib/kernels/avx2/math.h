// AVX2 + FMA lane helpers of the kernels built for it (every *_avx2.cpp): exp and sigmoid of 8
// fp32 lanes. The header sets no ISA itself: include it only from files built by
// ipex_isa_sources(avx2 ...) (lib/CMakeLists.txt). Every function is static, so each including
// file keeps its own copy, built with its own flags.
#pragma once

#include <immintrin.h>

namespace ipex::kernels::avx2 {

// exp(x) for 8 lanes: 2^n * e^f with n = round(x log2 e), |f| <= ln2 / 2, a degree-6 Taylor
// polynomial for e^f (kernels/avx512/math.h's exp16, with 2^n built in the exponent bits). x is
// clamped to [-87, 89]: below, e^x reads as e^-87 (1.6e-38); from 88.38 on n is 128, whose
// exponent bits are +inf's, so e^x is +inf (a little early: fp32's exp overflows at 88.72).
// A NaN x gives NaN: the clamps take x second (x86's max and min return the second operand
// when either is NaN), and p is NaN whatever 2^n reads.
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(89.f), _mm256_max_ps(_mm256_set1_ps(-87.f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    f = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), f);
    __m256 p = _mm256_set1_ps(1.f / 720);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f / 120));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f / 24));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f / 6));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
    const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(two_n));
}

// 1 / (1 + exp(-x)) for 8 lanes, with aten's values at NaN and the infinities: NaN stays NaN
// (exp8 keeps it), sigmoid(-inf) = 1 / (1 + inf) = 0 exactly (so SiLU's x * sigmoid(x) is NaN
// there, as aten's x / (1 + exp(-x)) is), sigmoid(+inf) = 1.
static inline __m256 sigmoid8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.f);
    return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

}  // namespace ipex::kernels::avx2
