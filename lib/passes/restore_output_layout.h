// Returns tensors in the standard contiguous layout: prepacked convolutions hand channels-last
// activations on, and a model's callers expect what the original returned. Adds
// ipex::contiguous (ops/layout_op.h: aten::contiguous with a faster channels-last copy) on every
// tensor the graph returns (also inside returned tuples, lists and dicts: torchvision's
// segmentation models return {"out": ...}); it is free for tensors
// already contiguous. No-op without prepacked convolutions.
// count = outputs covered.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult restore_output_layout(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
