// Runs of int8 convolutions with residual sums in a quantized model, grouped into
// ipex::int8_graph ops (ops/int8/int8_graph.h) as passes/group_convolutions.h groups float ones:
// ipex::int8_op / int8_op_sum with constant contexts, but depthwise ones, one value read from
// before the run, at least one sum, only the last output read after it.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::quant {

// details {graphs, convolutions, sums}; modules as group_convolutions'.
passes::PassResult group_int8_convolutions(std::shared_ptr<torch::jit::Graph> &graph);

// Each int8 2-D convolution (ipex::int8_op, no sum) whose output only an ipex::int8_max_pool2d
// (what quantize makes of aten::max_pool2d, int8_pool.h) with constant arguments reads, with
// that pooling as one ipex::int8_conv_max_pool (int8_graph.h); where the convolution's input is an
// ipex::quantize_per_tensor that only it reads, with the input parameters its context was built
// for (a network's input entering int8), the op takes the fp32 value instead and the quantize
// goes. count: ops made; modules: "conv+pool" labels; details {fp32_inputs: quantizes taken in}.
// Runs before group_int8_convolutions.
passes::PassResult pool_int8_convolutions(std::shared_ptr<torch::jit::Graph> &graph);

// Every aten::dequantize of one tensor as ipex::dequantize (ops/int8/int8_dequantize.cpp: the same
// values, vectorized; what it does not take it hands to aten). count: ops replaced.
passes::PassResult dequantize_edges(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::quant
