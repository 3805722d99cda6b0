// An int8 value dequantized for a chain of elementwise activations (silu, hardswish,
// sigmoid, gelu, ...; constant arguments, each result read by the next op only) is a function
// of its 256 byte values: the chain becomes one table lookup, ipex::int8_map (fp32 out) or,
// where only quantizes of one set of parameters read the chain's result,
// ipex::int8_requantize_map (int8 out, the quantize gone too). The table holds what the chain's
// own ops compute for the 256 dequantized values (and ipex::quantize_per_tensor of them), so
// the model's numbers stay those of the ops run one after the other.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <functional>

#include "quant/qconfig.h"

namespace ipex::quant {

struct MapCounts {
    int fp32 = 0;  // ipex::int8_map
    int int8 = 0;  // ipex::int8_requantize_map
};

// params_of(v): the quantization parameters of int8 value v, nullptr when unknown (then its
// dequantize stays). Every aten::dequantize of the graph is looked at.
MapCounts map_elementwise_chains(torch::jit::Graph &graph,
                                 const std::function<const TensorQ *(torch::jit::Value *)> &params_of);

// An eval batch norm (constant statistics) of a channel concatenation of dequantized int8
// values, or of one, with an optional relu, read only by quantizes of one set of parameters
// (DenseNet's cat -> norm -> relu between int8 convolutions): one
// ipex::int8_cat_scale_shift reading the int8 values (ops/int8/int8_cat_norm.cpp), the norm as
// x * (weight / sqrt(var + eps)) + (bias - mean * that). Returns how many.
int fuse_int8_cat_norms(torch::jit::Graph &graph,
                        const std::function<const TensorQ *(torch::jit::Value *)> &params_of);

struct GateCounts {
    int means = 0;     // ipex::int8_map_mean
    int products = 0;  // ipex::int8_map_gate
};

// The readers of a value mapped from int8 (an ipex::int8_map, or a dequantize of known
// parameters) that read it as a squeeze-excite gate does, on the int8 values instead: a mean over
// the last two dims (adaptive_avg_pool2d to 1x1, or mean over them) becomes one
// ipex::int8_map_mean; a product with another tensor read only by quantizes of one set of
// parameters becomes one ipex::int8_map_gate (ops/int8/int8_gate.cpp). The mapped value goes when
// nothing else reads it.
GateCounts fuse_int8_gates(torch::jit::Graph &graph,
                           const std::function<const TensorQ *(torch::jit::Value *)> &params_of);

}  // namespace ipex::quant
