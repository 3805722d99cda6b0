// Lane helpers the own AVX-512 kernels share (own_kernels_avx512.cpp,
// own_kernels_depthwise_avx512.cpp): bf16/fp32 loads and stores, sigmoid, the post-op chain.
// Include only from files built with the AVX-512 and AVX512-BF16 flags (lib/ops/CMakeLists.txt):
// everything here is in an unnamed namespace, so each such file keeps its own copy, built with
// its own flags, and none reaches code built without them.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/avx512/math.h"
#include "ops/own_kernels.h"

namespace ipex::ops::own_kernels {
namespace {

using ::ipex::kernels::avx512::kLanes;
using ::ipex::kernels::avx512::tail_mask;

// Inputs below this give exp(-x) about 5.5e34 at most: 1 + that stays finite and its
// reciprocal normal, so sigmoid is within 2e-35 of 0 there instead of a NaN.
constexpr float kSigmoidLowest = -80.f;

// Plain helpers rather than std::min/max: these files' flags must not reach inline functions
// other files share.
inline int64_t lesser(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t greater(int64_t a, int64_t b) { return a > b ? a : b; }

template <bool kBf16>
__m512 load(const void *base, int64_t i, __mmask16 m) {
    if constexpr (kBf16) return ::ipex::kernels::avx512::load_bf16(static_cast<const uint16_t *>(base) + i, m);
    return _mm512_maskz_loadu_ps(m, static_cast<const float *>(base) + i);
}

template <bool kBf16>
void store(void *base, int64_t i, __mmask16 m, __m512 v) {
    if constexpr (kBf16) {
        ::ipex::kernels::avx512::store_bf16(static_cast<uint16_t *>(base) + i, m, v);
    } else if (m == __mmask16(0xffff)) {
        _mm512_storeu_ps(static_cast<float *>(base) + i, v);  // see store_bf16
    } else {
        _mm512_mask_storeu_ps(static_cast<float *>(base) + i, m, v);
    }
}

// 1 / (1 + exp(-x)) of finite x. For a bf16 output: 1 / (1 + 2^t),
// t = -x log2(e) held in [-126, 115] (x >= kSigmoidLowest as below), 2^t as 2^floor(t) times
// a cubic in t - floor(t) (7.5e-5 relative on [0, 1)) and the 14-bit reciprocal: within
// 1.5e-4 relative against bf16's half spacing of 2e-3. For fp32, exp16 and a refined
// reciprocal (2^-28 relative). The clamps turn a NaN or an infinity into a bound: sigmoid()
// puts them right.
template <bool kBf16Out>
__m512 sigmoid_of_numbers(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.f);
    if constexpr (kBf16Out) {
        constexpr float kLog2e = 1.44269504088896341f;
        __m512 t = _mm512_min_ps(_mm512_mul_ps(x, _mm512_set1_ps(-kLog2e)), _mm512_set1_ps(-kSigmoidLowest * kLog2e));
        t = _mm512_max_ps(t, _mm512_set1_ps(-126.f));
        const __m512 whole = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        const __m512 f = _mm512_sub_ps(t, whole);
        __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(7.803047e-2f), f, _mm512_set1_ps(2.2605878e-1f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9583636e-1f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.9992509e-1f));
        return _mm512_rcp14_ps(_mm512_add_ps(one, _mm512_scalef_ps(p, whole)));
    }
    const __m512 minus_x = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_max_ps(x, _mm512_set1_ps(kSigmoidLowest)));
    const __m512 d = _mm512_add_ps(one, ::ipex::kernels::avx512::exp16(minus_x));
    const __m512 r = _mm512_rcp14_ps(d);  // then one Newton step
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.f)));
}

// VFIXUPIMMPS's table for sigmoid (4 bits per class of x, the classes from QNaN = 0 to positive
// = 7): a NaN x gives x (quieted), -inf gives +0, +inf gives +1, any other keeps the value.
constexpr int32_t kSigmoidSpecials = 0x00A80022;

// aten's sigmoid: sigmoid_of_numbers with the values of NaN and the infinities put in by one
// VFIXUPIMMPS. A NaN stays NaN and sigmoid(-inf) is exactly 0, so SiLU's x * sigmoid(x) is NaN
// at -inf as aten's x / (1 + exp(-x)) is.
template <bool kBf16Out>
__m512 sigmoid(__m512 x) {
    return _mm512_fixupimm_ps(sigmoid_of_numbers<kBf16Out>(x), x, _mm512_set1_epi32(kSigmoidSpecials), 0);
}

// One post-op on one vector, NaN in, NaN out, as aten's ops: each max or min takes v as its
// second operand (x86's max and min return the second operand when either is NaN), leaky_relu
// scales only the lanes below 0, sigmoid fixes NaN up (above). An infinity gives what aten's
// formula gives: hardswish(-inf) = -inf * 0 = NaN, leaky_relu(-inf) with slope 0 the same.
template <bool kBf16Out>
inline __attribute__((always_inline)) __m512 apply_op(const Eltwise &e, __m512 v) {
    switch (e.act) {
        case Act::relu: return _mm512_max_ps(_mm512_setzero_ps(), v);
        case Act::leaky_relu: {
            const __mmask16 negative = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
            return _mm512_mask_mul_ps(v, negative, v, _mm512_set1_ps(e.alpha));
        }
        case Act::clip: return _mm512_min_ps(_mm512_set1_ps(e.beta), _mm512_max_ps(_mm512_set1_ps(e.alpha), v));
        case Act::sigmoid: return sigmoid<kBf16Out>(v);
        case Act::silu: return _mm512_mul_ps(v, sigmoid<kBf16Out>(v));
        case Act::hardswish: {
            const __m512 t = _mm512_min_ps(_mm512_set1_ps(6.f),
                                           _mm512_max_ps(_mm512_setzero_ps(), _mm512_add_ps(v, _mm512_set1_ps(3.f))));
            return _mm512_mul_ps(_mm512_mul_ps(v, t), _mm512_set1_ps(1.f / 6.f));
        }
    }
    return v;
}

template <bool kBf16Out>
__m512 apply(const Problem &p, __m512 v) {
    for (int i = 0; i < p.num_post_ops; ++i) v = apply_op<kBf16Out>(p.post_ops[i], v);
    return v;
}

// `apply` over n vectors: one switch per post-op for all of them, each case a loop with its
// kind known at compile time (apply_op folds to that kind's instructions, constants set once).
template <bool kBf16Out, int kCount>
inline __attribute__((always_inline)) void apply_block(const Problem &p, __m512 *v) {
    for (int i = 0; i < p.num_post_ops; ++i) {
        const Eltwise e = p.post_ops[i];
        const auto each = [&](Act act) __attribute__((always_inline)) {
            const Eltwise known{act, e.alpha, e.beta};
#pragma GCC unroll 32
            for (int u = 0; u < kCount; ++u) v[u] = apply_op<kBf16Out>(known, v[u]);
        };
        switch (e.act) {
            case Act::relu: each(Act::relu); break;
            case Act::leaky_relu: each(Act::leaky_relu); break;
            case Act::clip: each(Act::clip); break;
            case Act::sigmoid: each(Act::sigmoid); break;
            case Act::silu: each(Act::silu); break;
            case Act::hardswish: each(Act::hardswish); break;
        }
    }
}

}  // namespace
}  // namespace ipex::ops::own_kernels
