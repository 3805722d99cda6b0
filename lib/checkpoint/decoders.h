// Decoders of the GPTQ and AWQ packed layouts into WoqLayer (woq_format.h).
// GPTQ: qweight int32 [K*bits/32, N] packed along input channels, qzeros int32
//   [G, N*bits/32] packed along output channels (v1 stores zero-1, v2 the zero itself),
//   scales [G, N], optional g_idx [K] (act-order when not k/group_size), optional bias [N].
// AWQ GEMM: qweight int32 [K, N/8] and qzeros int32 [G, N/8], the eight nibbles of a word in
//   the column order 0,2,4,6,1,3,5,7; scales [G, N]; zeros stored as they are.
// Shape and dtype mismatches are exit 3; unsupported bits or layouts are exit 4.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "checkpoint/woq_format.h"

namespace ipex::woq {

struct SourceLayer {
    std::string name;  // module path
    at::Tensor qweight, qzeros, scales, g_idx, bias;  // undefined when absent
};

struct DecodeSettings {
    int bits = 4;
    int group_size = 0;      // 0: infer from the scales; -1: per output channel
    bool gptq_v2 = false;    // GPTQ zeros stored as they are
};

WoqLayer decode_gptq(const SourceLayer &src, const DecodeSettings &settings);
WoqLayer decode_awq(const SourceLayer &src, const DecodeSettings &settings);

// Unpacks the bits-wide fields of int32 words along `dim` (0 or 1) of a 2-D tensor, field t of
// a word at bit offset t*bits; the result is int64 with that dim multiplied by 32/bits.
at::Tensor unpack_int32(const at::Tensor &packed, int bits, int64_t dim);

}  // namespace ipex::woq
