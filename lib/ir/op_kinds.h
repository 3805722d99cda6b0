// The one op-kind table: which ops (by qualified name, "aten::conv2d", "ipex::linear") are
// convolutions, linears, matmuls, attention or recurrent layers. Passes, the profiler's FLOP
// counts (bench/op_flops.h) and the graph utilities ask it; a new compute op is one row here.
#pragma once

#include <ATen/core/interned_strings.h>

#include <string>
#include <vector>

namespace ipex::ir {

enum class OpKind { kOther, kConvolution, kLinear, kMatmul, kAttention, kRecurrent };
const char *op_kind_name(OpKind kind);  // "conv", "linear", "matmul", "attention", "rnn", "other"

// The kind of an op by its qualified name; kOther for every op the table does not list.
OpKind op_kind(const std::string &name);

// aten's convolutions (conv1d/2d/3d, conv_transpose1d/2d/3d, convolution, _convolution).
const std::vector<c10::Symbol> &aten_conv_kinds();
bool is_aten_conv(c10::Symbol kind);

}  // namespace ipex::ir
