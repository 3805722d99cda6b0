// With --fp32-math-mode bf32, a prepacked op rounds its input to bf16 before computing. When
// every user of a bf32 op's output is such an op reading it as its input, the output is made
// bf16 right away (context dtype "bf32>bf16"): the same values, half the memory traffic, no
// conversion in the next op. Outputs returned by the graph, read by any other op, or used as
// the second tensor of a fused sum/binary stay fp32. No-op without bf32 contexts.
// count = ops switched.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult chain_bf32_outputs(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
