// Lane helpers the own kernels' AVX2 + FMA builds share (own_kernels_grouped_avx2.cpp,
// own_kernels_depthwise_avx2.cpp): the post-ops on 8 fp32 lanes (exp and sigmoid are kernels/avx2/math.h). Include only
// from files built with -mavx2 -mfma (lib/ops/CMakeLists.txt): everything here is in an
// unnamed namespace, so each such file keeps its own copy, built with its own flags.
#pragma once

#include <immintrin.h>

#include "kernels/avx2/math.h"
#include "ops/own_kernels.h"

namespace ipex::ops::own_kernels {
namespace {

using ::ipex::kernels::avx2::exp8;
using ::ipex::kernels::avx2::sigmoid8;

// One post-op of kind kAct on one vector, NaN in, NaN out, as aten's ops: each max or min
// takes v as its second operand, leaky_relu scales only the lanes below 0 (ordered compare).
template <Act kAct>
inline __m256 apply(const Eltwise &e, __m256 v) {
    const __m256 zero = _mm256_setzero_ps();
    if constexpr (kAct == Act::relu) return _mm256_max_ps(zero, v);
    if constexpr (kAct == Act::leaky_relu)
        return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(e.alpha)), _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
    if constexpr (kAct == Act::clip)
        return _mm256_min_ps(_mm256_set1_ps(e.beta), _mm256_max_ps(_mm256_set1_ps(e.alpha), v));
    if constexpr (kAct == Act::hardswish) {
        const __m256 t = _mm256_min_ps(_mm256_set1_ps(6.f), _mm256_max_ps(zero, _mm256_add_ps(v, _mm256_set1_ps(3.f))));
        return _mm256_mul_ps(_mm256_mul_ps(v, t), _mm256_set1_ps(1.f / 6.f));
    }
    if constexpr (kAct == Act::sigmoid) return sigmoid8(v);
    if constexpr (kAct == Act::silu) return _mm256_mul_ps(v, sigmoid8(v));
    return v;
}

// One post-op on one vector.
inline __m256 apply_op(const Eltwise &e, __m256 v) {
    switch (e.act) {
        case Act::relu: return apply<Act::relu>(e, v);
        case Act::leaky_relu: return apply<Act::leaky_relu>(e, v);
        case Act::clip: return apply<Act::clip>(e, v);
        case Act::hardswish: return apply<Act::hardswish>(e, v);
        case Act::sigmoid: return apply<Act::sigmoid>(e, v);
        case Act::silu: return apply<Act::silu>(e, v);
    }
    return v;
}

// The lanes i .. i + 7 below n, as VMASKMOVPS takes them (sign bits).
inline __m256i lanes_below(int64_t n, int64_t i) {
    const int64_t left = n - i;
    const int below = left <= 0 ? 0 : left >= 8 ? 8 : static_cast<int>(left);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(below), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The post-op e of kind kAct over n dense values, in place.
template <Act kAct>
void apply_pass(const Eltwise &e, float *data, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(data + i, apply<kAct>(e, _mm256_loadu_ps(data + i)));
    if (i < n) {
        const __m256i m = lanes_below(n, i);
        _mm256_maskstore_ps(data + i, m, apply<kAct>(e, _mm256_maskload_ps(data + i, m)));
    }
}

// p's post-ops over n dense fp32 values, in place: one pass each, its kind chosen once.
inline void post_ops_in_place(const Problem &p, float *data, int64_t n) {
    for (int k = 0; k < p.num_post_ops; ++k) {
        const Eltwise &e = p.post_ops[k];
        switch (e.act) {
            case Act::relu: apply_pass<Act::relu>(e, data, n); break;
            case Act::leaky_relu: apply_pass<Act::leaky_relu>(e, data, n); break;
            case Act::clip: apply_pass<Act::clip>(e, data, n); break;
            case Act::hardswish: apply_pass<Act::hardswish>(e, data, n); break;
            case Act::sigmoid: apply_pass<Act::sigmoid>(e, data, n); break;
            case Act::silu: apply_pass<Act::silu>(e, data, n); break;
        }
    }
}

}  // namespace
}  // namespace ipex::ops::own_kernels
