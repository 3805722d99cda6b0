// Merges aten::linear ops that read the same input (same block, constant weights of one
// dtype and device, same in-features, all with or all without bias) into one linear on the
// concatenated weight, followed by split_with_sizes along the last dim. Needs a frozen graph.
// Outputs that are later viewed, written in place, or returned are made contiguous so the
// merge never changes what user code sees. No-op when no two such linears share an input.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

// count = linears merged (a group of 3 counts 3); modules = their module paths.
PassResult concat_linear(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
