// The dot interaction's one shape-and-layout driver (interaction_kernel.h), built into each ISA's
// kernel with that ISA's dot product: the row of each feature for a sample, the first feature
// copied in front, then one dot product a gathered pair, rounded once into dst's dtype. Only
// the dot product differs between builds; its lanes are reduced here in the documented order.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/bf16.h"
#include "ops/recsys/interaction_kernel.h"

namespace ipex::ops::recsys {

// The lanes added pairwise: l + 8, then l + 4, l + 2, l + 1; lanes[0] is the sum.
inline float reduce_lanes(float *lanes) {
    for (int64_t width = kDotLanes / 2; width >= 1; width /= 2)
        for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    return lanes[0];
}

// dot(x, y, bf16, dim) -> the fp32 dot product of two feature rows in the documented order.
// With widen_bf16, a bf16 sample's rows are widened to fp32 once (exactly) and the dots run on
// them: for a dot whose bf16 loads do not vectorize, the fp32 one that does, same bits.
template <typename Dot>
void drive_interaction(const InteractionProblem &p, Dot dot, bool widen_bf16 = false) {
    const int64_t element = p.bf16 ? 2 : 4, out_width = p.dim + p.pairs;
    if (out_width == 0) return;  // nothing to write (and no output data)
    const bool widen = widen_bf16 && p.bf16;
    std::vector<const char *> row(static_cast<size_t>(p.features_n));
    std::vector<const char *> dot_row(static_cast<size_t>(p.features_n));
    std::vector<float> wide(widen ? static_cast<size_t>(p.features_n * p.dim) : 0);
    for (int64_t b = p.b_begin; b < p.b_end; ++b) {
        for (int64_t f = 0; f < p.features_n; ++f) {
            row[f] = p.features[f] ? static_cast<const char *>(p.features[f]) + b * p.feature_stride[f] * element
                                   : nullptr;  // an empty feature (width 0) has no data
            dot_row[f] = row[f];
            if (widen && row[f]) {
                float *w = wide.data() + f * p.dim;
                const auto *bits = reinterpret_cast<const uint16_t *>(row[f]);
                for (int64_t k = 0; k < p.dim; ++k) w[k] = kernels::from_bf16(bits[k]);
                dot_row[f] = reinterpret_cast<const char *>(w);
            }
        }
        char *dst = static_cast<char *>(p.dst) + b * out_width * element;
        if (p.dim > 0) std::memcpy(dst, row[0], static_cast<size_t>(p.dim * element));
        for (int64_t q = 0; q < p.pairs; ++q) {
            const float sum = dot(dot_row[p.rows[q]], dot_row[p.cols[q]], p.bf16 && !widen, p.dim);
            if (p.bf16) {
                reinterpret_cast<uint16_t *>(dst)[p.dim + q] = kernels::to_bf16(sum);
            } else {
                reinterpret_cast<float *>(dst)[p.dim + q] = sum;
            }
        }
    }
}

}  // namespace ipex::ops::recsys
