// Runs of int8 convolutions with residual sums in a quantized model, grouped into
// ipex::int8_graph ops (quant/int8_graph.h) as passes/group_convolutions.h groups float ones:
// ipex::int8_op / int8_op_sum with constant contexts, but depthwise ones, one value read from
// before the run, at least one sum, only the last output read after it.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "passes/pass_result.h"

namespace ipex::quant {

// details {graphs, convolutions, sums}; modules as group_convolutions'.
passes::PassResult group_int8_convolutions(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::quant
