// The dot interaction's arithmetic, torch-free: for each sample b and each gathered pair p,
// dst[b][dim + p] = dot(feature rows[p] of b, feature cols[p] of b), after dst[b][0, dim) = the
// first feature's row. Every dot product is summed the same way in every build: lane l (of 16)
// accumulates the products of the elements l, l + 16, l + 32, ... in order, a product and a sum
// each rounded (no fused multiply-add), then the lanes are added pairwise (l + 8, l + 4, l + 2,
// l + 1). bf16 data is widened exactly and each output rounded once, so the portable and AVX-512
// builds agree to the bit.
#pragma once

#include <cstdint>

namespace ipex::ops::recsys {

constexpr int64_t kDotLanes = 16;

struct InteractionProblem {
    bool bf16 = false;                      // features and dst bf16 (bits), else fp32
    const void *const *features = nullptr;  // F matrices [batch, dim], rows `feature_stride` apart
    const int64_t *feature_stride = nullptr;
    int64_t features_n = 0;
    int64_t dim = 0;
    const int64_t *rows = nullptr, *cols = nullptr;  // pairs of features, each in [0, F)
    int64_t pairs = 0;
    void *dst = nullptr;             // [batch, dim + pairs], dense
    int64_t b_begin = 0, b_end = 0;  // the samples computed
};

void run_interaction(const InteractionProblem &p);  // portable
namespace avx512 {
bool available();  // AVX-512 (F, BW, VL)
void run_interaction(const InteractionProblem &p);
}  // namespace avx512

}  // namespace ipex::ops::recsys
