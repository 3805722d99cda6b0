// Folds a residual add into the prepacked convolution feeding it, as oneDNN's sum post-op:
// conv(x) + alpha * other (aten::add/add_; alpha must be 1 when the conv output is the second
// operand), then later post-ops such as relu fold on top (fuse_eltwise). When `other` comes
// fresh from another prepacked op and has no other user, the sum runs in place in its buffer.
// Needs prepack_weights to have run; no-op without such a pattern. A conv output with a
// second user or returned by the graph is left alone. count = adds folded.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "passes/pass_result.h"

namespace ipex::passes {

PassResult fuse_conv_sum(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
