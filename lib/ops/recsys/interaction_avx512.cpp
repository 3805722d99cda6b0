// The dot interaction's AVX-512 dot product (interaction_kernel.h), run by the shared driver
// (interaction_driver.h): one register holds the portable build's 16 lane sums, added in its
// order without fused multiply-adds (a lane past the row's end adds 0 * 0, which leaves it as it
// is), and reduced by the same pairwise steps, so the two builds agree to the bit. Built with
// AVX-512 flags; runs only after avx512::available().
#include <immintrin.h>

#include "kernels/avx512/math.h"
#include "ops/recsys/interaction_driver.h"

namespace ipex::ops::recsys::avx512 {
namespace {

using ::ipex::kernels::avx512::tail_mask;

__m512 load(const void *src, bool bf16, int64_t i, __mmask16 m) {
    if (bf16) return ::ipex::kernels::avx512::load_bf16(static_cast<const uint16_t *>(src) + i, m);
    return _mm512_maskz_loadu_ps(m, static_cast<const float *>(src) + i);
}

float dot(const void *x, const void *y, bool bf16, int64_t dim) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < dim; k += kDotLanes) {
        const __mmask16 m = tail_mask(dim - k);
        acc = _mm512_add_ps(acc, _mm512_mul_ps(load(x, bf16, k, m), load(y, bf16, k, m)));
    }
    alignas(64) float lanes[kDotLanes];
    _mm512_store_ps(lanes, acc);
    return reduce_lanes(lanes);
}

}  // namespace

void run_interaction(const InteractionProblem &p) { drive_interaction(p, dot); }

}  // namespace ipex::ops::recsys::avx512
