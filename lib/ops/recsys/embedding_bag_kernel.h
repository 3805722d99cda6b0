// The merged EmbeddingBag's inner step, torch-free: one table row added to a bag's fp32 sums,
// acc[k] += row[k] (times the index's weight, a product then a sum, each rounded; bf16 rows
// widened exactly). Each element's sum runs over the bag's rows in index order in every build, so
// the portable and AVX-512 builds agree to the bit.
#pragma once

#include <cstdint>

namespace ipex::ops::recsys {

// weight: the index's per-sample weight, or nullptr for none.
void add_row(const void *row, bool bf16, const float *weight, int64_t dim, float *acc);  // portable
namespace avx512 {
void add_row(const void *row, bool bf16, const float *weight, int64_t dim, float *acc);
}  // namespace avx512

}  // namespace ipex::ops::recsys
