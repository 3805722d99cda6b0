// Folds an elementwise op into the prepacked conv/linear feeding it, as a oneDNN post-op:
// relu, leaky_relu, relu6/hardtanh/clamp (constant bounds), gelu (erf and tanh), silu,
// sigmoid, tanh, hardswish, elu (scale 1). In-place variants too. Needs prepack_weights to
// have run; no-op when no such op is the only user of a prepacked op's output (an output
// with a second user, or returned by the graph, is left alone). count = ops folded.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fuse_eltwise(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
