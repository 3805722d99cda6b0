// Removes dropout in inference graphs: every variant (dropout, feature_dropout,
// alpha_dropout, feature_alpha_dropout and their in-place forms) whose `train` argument is a
// constant false, as freezing an eval-mode model makes it. No-op when there is none; a
// dropout with train=True or a non-constant train is left alone and reported as skipped.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult remove_dropout(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
