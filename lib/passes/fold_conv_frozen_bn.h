// Folds the per-channel affine map a frozen FrozenBatchNorm2d leaves behind (torchvision's
// detection backbones; scripted or traced, freezing turns its buffers into x * scale + shift
// with [1, C, 1, 1] constants) into the convolution before it, as fold_conv_bn does for
// batch_norm: aten::mul of a convolution's output by a constant per-channel tensor scales the
// weight and bias; aten::add / aten::sub of one (constant alpha) shifts the bias. One sweep
// in program order folds a mul and the add after it whole.
// Needs a frozen graph (constant conv weight and bias). Left alone: a conv output with other
// users or returned by the graph, a constant of another dtype than the weight, one that is not
// per-channel (every dim 1 but the channel dim, at most the conv output's rank), one of the
// output's full rank when the conv's input is known to be unbatched. No-op when none applies.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fold_conv_frozen_bn(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
