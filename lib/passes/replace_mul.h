// Products of two tensors, where libtorch 1.13's broadcast multiply reads and writes
// channels-last tensors at half the memory's speed:
//
//   aten::mul(a, b)  ->  ipex::scale_mul(a, b)
//
// (ops/norm_op.h: aten::mul's definition; the own kernel when one operand is a 4-D fp32/bf16
// channels-last tensor and the other one value per image and channel of it, as the gate of a
// squeeze-excitation block, written into the first's storage when nothing else holds it;
// aten::mul for anything else). Which case applies is decided at run time from the tensors,
// so every aten::mul.Tensor is replaced. Prepacked mode only (the op lives in libipex_ops.so);
// run after the passes that match aten::mul in their patterns (fuse_attention) and after
// cast_to_lowp, which knows the aten ops' dtype rules.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

// details: {"scale_mul": n}; count: nodes replaced
PassResult replace_mul(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
