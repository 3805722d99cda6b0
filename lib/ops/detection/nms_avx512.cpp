// NMS's inner loop (nms_kernel.h) on 16 later boxes a step: the portable loop's operations lane
// by lane (max_ps(b, a) is std::max(a, b), NaN included), so the kept set is the same. Built
// with AVX-512 flags; runs only after avx512::nms_available().
#include <immintrin.h>

#include "kernels/avx512/math.h"
#include "ops/detection/nms_kernel.h"

namespace ipex::ops::detection::avx512 {

int64_t suppress(const NmsProblem<float> &p, int64_t *keep) {
    constexpr int64_t kLanes = 16;
    const __m512 zero = _mm512_setzero_ps(), threshold = _mm512_set1_ps(p.threshold);
    int64_t kept = 0;
    for (int64_t i = 0; i < p.n; ++i) {
        if (p.suppressed[i]) continue;
        keep[kept++] = i;
        const __m512 ix1 = _mm512_set1_ps(p.x1[i]), iy1 = _mm512_set1_ps(p.y1[i]);
        const __m512 ix2 = _mm512_set1_ps(p.x2[i]), iy2 = _mm512_set1_ps(p.y2[i]);
        const __m512 iarea = _mm512_set1_ps(p.area[i]);
        for (int64_t j = i + 1; j < p.n; j += kLanes) {
            const __mmask16 m = ::ipex::kernels::avx512::tail_mask(p.n - j);
            const __m512 xx1 = _mm512_max_ps(_mm512_maskz_loadu_ps(m, p.x1 + j), ix1);
            const __m512 yy1 = _mm512_max_ps(_mm512_maskz_loadu_ps(m, p.y1 + j), iy1);
            const __m512 xx2 = _mm512_min_ps(_mm512_maskz_loadu_ps(m, p.x2 + j), ix2);
            const __m512 yy2 = _mm512_min_ps(_mm512_maskz_loadu_ps(m, p.y2 + j), iy2);
            const __m512 w = _mm512_max_ps(_mm512_sub_ps(xx2, xx1), zero);
            const __m512 h = _mm512_max_ps(_mm512_sub_ps(yy2, yy1), zero);
            const __m512 inter = _mm512_mul_ps(w, h);
            const __m512 union_area =
                _mm512_sub_ps(_mm512_add_ps(iarea, _mm512_maskz_loadu_ps(m, p.area + j)), inter);
            const __m512 ovr = _mm512_div_ps(inter, union_area);
            const __mmask16 over = _mm512_mask_cmp_ps_mask(m, ovr, threshold, _CMP_GT_OQ);
            // Flags as bytes: 1 where over, OR-ed into the suppressed ones.
            const __m128i flags = _mm_maskz_set1_epi8(over, 1);
            const __m128i old = _mm_maskz_loadu_epi8(m, p.suppressed + j);
            _mm_mask_storeu_epi8(p.suppressed + j, m, _mm_or_si128(old, flags));
        }
    }
    return kept;
}

}  // namespace ipex::ops::detection::avx512
