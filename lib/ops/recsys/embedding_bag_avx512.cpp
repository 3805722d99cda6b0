// The merged EmbeddingBag's row step (embedding_bag_kernel.h) on 16 elements a register: the
// portable loop's operations element by element (a product then a sum, no fused multiply-add).
// Built with AVX-512 flags; runs only after avx512::available() (interaction_kernel.h).
#include <immintrin.h>

#include "kernels/avx512/math.h"
#include "ops/recsys/embedding_bag_kernel.h"

namespace ipex::ops::recsys::avx512 {

void add_row(const void *row, RowType type, const float *weight, int64_t dim, float *acc) {
    using ::ipex::kernels::avx512::kLanes;
    const __m512 w = _mm512_set1_ps(weight ? *weight : 1.f);
    float scale = 0.f, bias = 0.f;
    if (type == RowType::uint8_rowwise) read_row_tail(row, dim, &scale, &bias);
    const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(bias);
    for (int64_t k = 0; k < dim; k += kLanes) {
        const __mmask16 m = ::ipex::kernels::avx512::tail_mask(dim - k);
        __m512 v;
        if (type == RowType::bf16) {
            v = ::ipex::kernels::avx512::load_bf16(static_cast<const uint16_t *>(row) + k, m);
        } else if (type == RowType::uint8_rowwise) {
            const __m128i q = _mm_maskz_loadu_epi8(m, static_cast<const uint8_t *>(row) + k);
            v = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)), s), z);
        } else {
            v = _mm512_maskz_loadu_ps(m, static_cast<const float *>(row) + k);
        }
        if (weight) v = _mm512_mul_ps(v, w);
        _mm512_mask_storeu_ps(acc + k, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + k), v));
    }
}

}  // namespace ipex::ops::recsys::avx512
