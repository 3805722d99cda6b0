// How inputs are passed to a module's forward, for every caller that runs one (model's
// run_forward for verify and bench, the optimize pipeline's sample-input run).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/api/module.h>

#include <vector>

namespace ipex::ir {

// The arguments of forward for these inputs: a forward taking one List[Tensor] and otherwise
// only arguments with defaults (torchvision's detectors: images, targets=None) gets the input
// tensors as that one list; any other forward gets them as they are.
std::vector<c10::IValue> forward_arguments(const torch::jit::Module &module, const std::vector<c10::IValue> &inputs);

}  // namespace ipex::ir
