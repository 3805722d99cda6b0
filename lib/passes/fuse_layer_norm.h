// Replaces aten::layer_norm by ipex::layer_norm (ops/layer_norm_op.h), folding the
// aten::add that makes its input into it:
//
//   layer_norm(add(a, b, alpha), ...)   ->  ipex::layer_norm(a, b, alpha, ...)
//       the sum used elsewhere too      ->  (sum, out) = ipex::add_layer_norm(a, b, alpha, ...)
//   layer_norm(x, ...)                  ->  ipex::layer_norm(x, None, 1, ...)
//
// The op normalizes in fp32 and returns the dtype the add (or x) has, so after cast_to_lowp a
// bf16 model's layer norms read and write bf16 instead of being cast to fp32 and back, and the
// residual add costs no pass of its own. Run before cast_to_lowp; prepacked mode only (the
// op lives in libipex_ops.so). An add whose sum is used before the layer norm, or in another
// block, is folded only when the layer norm's other arguments are already defined there.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fuse_layer_norm(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
