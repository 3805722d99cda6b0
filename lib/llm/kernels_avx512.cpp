// AVX-512 forms of the decoder's elementwise kernels (kernels.h): SiLU·mul and the W8A8
// quantize step. Built with the ISA flags; called only after avx512_ok().
#include <immintrin.h>

#include "kernels/avx512/math.h"
#include "llm/kernels.h"

namespace ipex::llm::kernels {
namespace {

using ::ipex::kernels::avx512::exp16;
using ::ipex::kernels::avx512::tail_mask;

// quantize_row_s8's lanes: the portable loop's steps (kernels.cpp), same bits: the fp32
// product, NaN to 0, the clamp, then VCVTPS2DQ (round to nearest even, the default mode).
inline void quantize16(__m512 x, const float *m, int8_t *out, __mmask16 mask) {
    const __m512 limit = _mm512_set1_ps(127.f);
    __m512 v = _mm512_mul_ps(x, _mm512_maskz_loadu_ps(mask, m));
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
    v = _mm512_max_ps(_mm512_min_ps(v, limit), _mm512_sub_ps(_mm512_setzero_ps(), limit));
    _mm_mask_storeu_epi8(out, mask, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
}

}  // namespace

// silu(g) * u = g / (1 + exp(-g)) * u, as the portable loop: exp16 overflows to +inf for
// -g > 88.7 (g / inf = -0 where aten's tiny negative is), and gives NaN at -g = +inf, so
// silu(-inf) is NaN as aten's -inf * sigmoid(-inf) is.
void silu_mul_avx512(const float *gu, float *out, int64_t rows, int64_t inter) {
    const __m512 one = _mm512_set1_ps(1.f);
    for (int64_t r = 0; r < rows; ++r) {
        const float *g = gu + r * 2 * inter, *u = g + inter;
        float *o = out + r * inter;
        for (int64_t i = 0; i < inter; i += 16) {
            const __mmask16 mask = tail_mask(inter - i);
            const __m512 gv = _mm512_maskz_loadu_ps(mask, g + i);
            const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv));
            const __m512 silu = _mm512_div_ps(gv, _mm512_add_ps(one, e));
            _mm512_mask_storeu_ps(o + i, mask, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(mask, u + i)));
        }
    }
}

void quantize_row_s8_avx512(const float *in, const float *m, int8_t *out, int64_t k) {
    for (int64_t j = 0; j < k; j += 16) {
        const __mmask16 mask = tail_mask(k - j);
        quantize16(_mm512_maskz_loadu_ps(mask, in + j), m + j, out + j, mask);
    }
}

void quantize_row_s8_avx512(const uint16_t *in, const float *m, int8_t *out, int64_t k) {
    for (int64_t j = 0; j < k; j += 16) {
        const __mmask16 mask = tail_mask(k - j);
        quantize16(::ipex::kernels::avx512::load_bf16(in + j, mask), m + j, out + j, mask);
    }
}

}  // namespace ipex::llm::kernels
