// GGUF block types held in the weight-only layout, exactly but for q6_K (woq_format.h: W = (q - zero) * scale,
// groups of 32 input channels), so a quantized GGUF file runs the int4/int8 weight-only kernels
// without a dense copy. The nibble order of a q4_0 / q4_1 block (element j low, j + 16 high) is
// the kernels' int4 block order (woq_layout.h), so their rows are copied, not re-packed.
//   q4_0 (d, 16 bytes; w = d (q - 8))  int4: scale d, zero 8          dequantizes bit for bit
//   q8_0 (d, 32 int8;  w = d q)        int8: q + 128 stored, zero 128 dequantizes bit for bit
//   q4_1 (d, m, 16 bytes; w = d q + m) int4: scale d, zero -m / d     within 2^-24 (|m| + 3 |w|)
//        of the format's fp32 value (fl(-m/d), fl(q - z), fl(t d) against one rounding of
//        d q + m; d q itself is exact); a block with d = 0 holds w = m exactly as q = 0,
//        zero -1, scale m.
//   q4_K (256: d, dmin, 8 sub-blocks of 32 with 6-bit sc and m; w = (d sc) q - (dmin m))
//        int4, a group per sub-block: scale d sc, zero (dmin m) / (d sc), within
//        2^-24 (|dmin m| + 3 |w|) as for q4_1 (d sc and dmin m are exact products in fp32); a
//        sub-block with d sc = 0 holds -dmin m exactly as q = 0, zero 1, scale dmin m.
//   q5_K (q4_K with a fifth bit, q 0..31) int8 (q stored as 0..31), groups and bound as q4_K.
//   q6_K (256: d, 16 sub-blocks of 16 with int8 sc; w = (d sc) (q - 32), q 0..63) converted, not
//        exact: two sub-blocks' scales do not share one int8 grid in general, and the vector
//        kernels take only groups of whole 32-channel blocks (int8 with groups of 16 would be
//        exact but runs only in the reference kernels). Each group of 32 (two sub-blocks) holds
//        the dequantizer's fp32 values w re-quantized round-to-nearest to symmetric int8 as q8_0
//        is held (q + 128 stored, zero 128) with the group's own scale s = max|w| / 127:
//        |w - s q| <= s / 2 (1 + 2^-16) (fp32 roundings included), at most max|w| / 254, and as
//        max|w| <= 32 |d| max|sc| that is at most 32/254, about 1/8, of the larger sub-block's
//        q6_K step |d sc|. A group of zeros (d = 0) holds them exactly (scale 0). The layer's
//        source_group_size is 16, its group_size 32: a loader tells the conversion by the two.
//        A load with LoadOptions::gguf_dequantize (or `ipex-tool import gguf`) keeps the exact
//        dequantized values, dense, instead.
// A non-finite d or m (q4_1), d or dmin (K-quants) or d (q6_K) is not held. q5_0, q5_1, f16 and
// the rest stay dense: the loader dequantizes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/woq_format.h"

namespace ipex::woq {

// Whether `type` (a GgmlType number) is held exactly by ggml_to_woq (q4_0, q4_1, q8_0, q4_K, q5_K).
bool ggml_woq_exact(uint32_t type);
// Whether ggml_to_woq takes `type`: the exact ones and q6_K (converted within the bound above).
bool ggml_woq_held(uint32_t type);

// The weight-only layer `name` of a [rows, cols] tensor of `type` at src (rows * cols / block
// elements blocks, cols a multiple of the block: 32, or 256 for the K-quants). Output row r is
// source row `row_order[r]` when row_order is given (its size rows, a permutation): the q/k row
// un-interleaving applied to qweight, scales and zeros alike. nullopt for a tensor with a non-finite fp16 scale or minimum in some block (not
// held: read it densely instead).
std::optional<WoqLayer> ggml_to_woq(const std::string &name, uint32_t type, const uint8_t *src, int64_t rows,
                                    int64_t cols, const std::vector<int64_t> *row_order = nullptr);

}  // namespace ipex::woq
