// The dot interaction (interaction_kernel.h) on 16-lane registers: one register holds the
// portable build's 16 lane sums, added in its order without fused multiply-adds (a lane past
// the row's end adds 0 * 0, which leaves it as it is), and reduced by the same pairwise steps,
// so the two agree to the bit. Built with AVX-512 flags; runs only after avx512::available().
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels/avx512/math.h"
#include "kernels/bf16.h"
#include "ops/recsys/interaction_kernel.h"

namespace ipex::ops::recsys::avx512 {
namespace {

using ::ipex::kernels::avx512::tail_mask;

__m512 load(const void *src, bool bf16, int64_t i, __mmask16 m) {
    if (bf16) return ::ipex::kernels::avx512::load_bf16(static_cast<const uint16_t *>(src) + i, m);
    return _mm512_maskz_loadu_ps(m, static_cast<const float *>(src) + i);
}

// The lanes of acc added pairwise: l + 8, then l + 4, l + 2, l + 1 (the portable order).
float reduce(__m512 acc) {
    alignas(64) float lanes[kDotLanes];
    _mm512_store_ps(lanes, acc);
    for (int64_t width = kDotLanes / 2; width >= 1; width /= 2)
        for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    return lanes[0];
}

}  // namespace

void run_interaction(const InteractionProblem &p) {
    const int64_t element = p.bf16 ? 2 : 4, out_width = p.dim + p.pairs;
    if (out_width == 0) return;  // nothing to write (and no output data)
    std::vector<const char *> row(static_cast<size_t>(p.features_n));
    for (int64_t b = p.b_begin; b < p.b_end; ++b) {
        for (int64_t f = 0; f < p.features_n; ++f)
            row[f] = p.features[f] ? static_cast<const char *>(p.features[f]) + b * p.feature_stride[f] * element
                                   : nullptr;  // an empty feature (width 0) has no data
        char *dst = static_cast<char *>(p.dst) + b * out_width * element;
        if (p.dim > 0) std::memcpy(dst, row[0], static_cast<size_t>(p.dim * element));
        for (int64_t q = 0; q < p.pairs; ++q) {
            const char *x = row[p.rows[q]], *y = row[p.cols[q]];
            __m512 acc = _mm512_setzero_ps();
            for (int64_t k = 0; k < p.dim; k += kDotLanes) {
                const __mmask16 m = tail_mask(p.dim - k);
                acc = _mm512_add_ps(acc, _mm512_mul_ps(load(x, p.bf16, k, m), load(y, p.bf16, k, m)));
            }
            const float dot = reduce(acc);
            if (p.bf16) {
                reinterpret_cast<uint16_t *>(dst)[p.dim + q] = ::ipex::kernels::to_bf16(dot);
            } else {
                reinterpret_cast<float *>(dst)[p.dim + q] = dot;
            }
        }
    }
}

}  // namespace ipex::ops::recsys::avx512
