// Folds an inference batch_norm into the convolution that feeds it (conv1d/2d/3d,
// conv_transpose1d/2d/3d, traced aten::_convolution incl. transposed, grouped).
// Needs a frozen graph: conv weight/bias and all batch_norm inputs must be constants and
// training a constant false; the conv output must feed only that batch_norm (and shape
// queries such as scripted BatchNorm's dim() check). No-op when no such pair exists;
// pairs that fail a check are reported in `skipped`.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fold_conv_bn(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
