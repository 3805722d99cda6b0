// Folds a residual add into the prepacked convolution feeding it, as oneDNN's sum post-op:
// conv(x) + alpha * other (aten::add/add_; alpha must be 1 when the conv output is the second
// operand), then later post-ops such as relu fold on top (fuse_eltwise). When `other` is
// computed in the graph (no graph input, no constant) and nothing reads it (or an alias of it)
// after the add, the sum runs in place in its buffer: ipex::convolution_sum_, whose schema
// says it writes `other`.
// Needs prepack_weights to have run; no-op without such a pattern. A conv output with a
// second user or returned by the graph is left alone, as is a conv with post-ops already
// (relu(conv(x)) + y: the add stays, or folds into the conv that computes y, if one does).
// count = adds folded.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fuse_conv_sum(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
