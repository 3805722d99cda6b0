// The merged EmbeddingBag's inner step, torch-free: one table row added to a bag's fp32 sums,
// acc[k] += row[k] (times the index's weight, a product then a sum, each rounded). bf16 rows are
// widened exactly; uint8 rows are dequantized first, value = q * scale + bias (a product then a
// sum, each rounded in fp32). Each element's sum runs over the bag's rows in index order in every
// build, so the portable, AVX2 and AVX-512 builds agree to the bit.
#pragma once

#include <cstdint>

namespace ipex::ops::recsys {

// How a table stores its rows.
enum class RowType {
    fp32,
    bf16,
    // `dim` uint8 values, then the row's fp32 scale and fp32 bias (8 bytes, unaligned): aten's
    // and fbgemm's byte row-wise layout (quantized::embedding_bag_byte_prepack).
    uint8_rowwise,
};

// Bytes after a uint8 row's values: its fp32 scale and bias.
constexpr int64_t kRowwiseTailBytes = 8;

// Outputs of one call larger than this (all tables together) are written around the caches
// (non-temporal stores): at Criteo's shapes writing the 27 MB of fp32 outputs through the caches,
// each line read before it is written, took more time than reading the rows. Smaller outputs stay
// cached for the op that reads them next. Not the last-level cache's size: glibc reports the
// whole socket's (256 MiB on a 2-core slice of an EPYC whose slice sees 16 MiB).
constexpr int64_t kStreamOutputBytes = int64_t{8} << 20;

// weight: the index's per-sample weight, or nullptr for none.
void add_row(const void *row, RowType type, const float *weight, int64_t dim, float *acc);  // portable
namespace avx2 {
void add_row(const void *row, RowType type, const float *weight, int64_t dim, float *acc);
}  // namespace avx2
namespace avx512 {
void add_row(const void *row, RowType type, const float *weight, int64_t dim, float *acc);
}  // namespace avx512

// The portable step on elements [begin, end) of a row whose uint8 scale and bias were read
// already (any values for other row types): the vector builds' tails.
void add_row_range(const void *row, RowType type, const float *weight, float scale, float bias, int64_t begin,
                   int64_t end, float *acc);

// A uint8 row's scale and bias (after its `dim` values).
void read_row_tail(const void *row, int64_t dim, float *scale, float *bias);

}  // namespace ipex::ops::recsys
