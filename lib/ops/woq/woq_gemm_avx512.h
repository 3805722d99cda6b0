// What the large-batch WOQ kernels (woq_gemm_avx512.cpp: bf16, woq_gemm_s8_avx512.cpp: int8
// activations) share. Included only by those two translation units, which are built with the
// same AVX-512 flags. The kernels keep their sums transposed: a vector holds one weight row's
// sums for 16 rows of x.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/avx512/math.h"

namespace ipex::woq::kernels::gemm {

// Rows [16 s0, 16 (s0 + nb)) of x's sums (acc: weight row r at r * 16 nb, a vector of 16 rows
// of x) to out [m, ...] (row stride ldo) at columns n0 + r: 16 x 16 blocks transposed in
// registers, the weight rows past the last 16 one by one. Rows of x from m on are not written.
inline void store_slab(float *out, int64_t ldo, int64_t m, int64_t n0, int64_t rows, int64_t s0, int64_t nb,
                       const float *acc) {
    const int64_t lda = nb * 16, m0 = s0 * 16, m_end = (s0 + nb) * 16 < m ? (s0 + nb) * 16 : m;
    int64_t r = 0;
    for (; r + 16 <= rows; r += 16)
        for (int64_t i = m0; i < m_end; i += 16) {
            __m512 v[16];
            for (int j = 0; j < 16; ++j) v[j] = _mm512_loadu_ps(acc + (r + j) * lda + (i - m0));
            ::ipex::kernels::avx512::transpose16x16(v);
            const int64_t n = m_end - i < 16 ? m_end - i : 16;
            for (int64_t j = 0; j < n; ++j) _mm512_storeu_ps(out + (i + j) * ldo + n0 + r, v[j]);
        }
    for (int64_t i = m0; i < m_end; ++i) {
        float *o = out + i * ldo + n0;
        const float *c = acc + (i - m0);
        for (int64_t j = r; j < rows; ++j) o[j] = c[j * lda];
    }
}

}  // namespace ipex::woq::kernels::gemm
