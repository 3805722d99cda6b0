// Folds an inference BatchNorm1d into the aten::linear that feeds it. Needs a frozen graph:
// constant linear weight/bias and batch_norm inputs, training a constant false, and the
// linear output feeding only that batch_norm (and shape queries such as the dim() check of
// scripted BatchNorm1d). batch_norm normalizes dim 1, the linear's feature dim only for 2-D
// outputs: with a known input rank of 2 the fold is direct, with an unknown rank it is
// guarded by `x.dim() == 2` (original linear + batch_norm in the else branch), with a known
// other rank it is skipped. No-op when no linear -> batch_norm pair exists.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fold_linear_bn(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
