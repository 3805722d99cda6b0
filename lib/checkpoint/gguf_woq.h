// GGUF block types held exactly in the weight-only layout (woq_format.h: W = (q - zero) * scale,
// groups of 32 input channels), so a quantized GGUF file runs the int4/int8 weight-only kernels
// without a dense copy. The nibble order of a GGUF block (element j low, j + 16 high) is the
// kernels' int4 block order (woq_layout.h), so rows are copied, not re-packed.
//   q4_0 (d, 16 bytes; w = d (q - 8))  int4: scale d, zero 8          dequantizes bit for bit
//   q8_0 (d, 32 int8;  w = d q)        int8: q + 128 stored, zero 128 dequantizes bit for bit
//   q4_1 (d, m, 16 bytes; w = d q + m) int4: scale d, zero -m / d     within 2^-24 (|m| + 3 |w|)
//        of the format's fp32 value (fl(-m/d), fl(q - z), fl(t d) against one rounding of
//        d q + m; d q itself is exact); a block with d = 0 holds w = m exactly as q = 0,
//        zero -1, scale m.
// Other types (q5_0, q5_1, K-quants, f16, ...) are not held here: the loader dequantizes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/woq_format.h"

namespace ipex::woq {

// Whether `type` (a GgmlType number) converts with ggml_to_woq.
bool ggml_woq_exact(uint32_t type);

// The weight-only layer `name` of a [rows, cols] tensor of `type` at src (rows * cols / 32
// blocks, cols a multiple of 32). Output row r is source row `row_order[r]` when row_order is
// given (its size rows, a permutation): the q/k row un-interleaving applied to qweight, scales and
// zeros alike. nullopt for a q4_1 tensor with a non-finite scale or minimum (not held exactly:
// read it densely instead).
std::optional<WoqLayer> ggml_to_woq(const std::string &name, uint32_t type, const uint8_t *src, int64_t rows,
                                    int64_t cols, const std::vector<int64_t> *row_order = nullptr);

}  // namespace ipex::woq
