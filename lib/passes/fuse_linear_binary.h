// Folds an add or mul with another tensor into the prepacked linear feeding it, as a oneDNN
// binary post-op (the other tensor broadcast over the output, e.g. a residual or a gate):
// linear(x) + other, other + linear(x) (aten::add/add_ with alpha 1), linear(x) * other.
// Needs prepack_weights to have run; no-op without such a pattern. A linear output with a
// second user or returned by the graph is left alone. count = ops folded.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fuse_linear_binary(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
