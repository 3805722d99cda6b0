// Inference batch norms that no convolution absorbed (a norm before its convolution, as in
// DenseNet's and pre-activation ResNets' layers), with what feeds and follows them:
//
//   aten::cat([x1, x2, ...], 1) -> aten::batch_norm -> aten::relu / relu_
//       ->  ipex::norm_relu([x1, x2, ...], scale, shift, relu=True)
//
// (ops/norm_op.h: one pass over the inputs instead of three over the concatenation). The
// cat is taken in when its list and its result are used by nothing else; the ReLU when the
// norm's result is used by nothing else; a norm alone becomes norm_relu([x], ...). Only
// running statistics that are constants, training false, a constant eps; scale and shift
// are computed in fp64 and stored in fp32. Prepacked mode only (the op lives in
// libipex_ops.so); run after cast_to_lowp, which knows the aten ops' dtype rules.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

// details: {"norm_relu": n, "with_cat": n, "with_relu": n}; count: batch norms replaced
PassResult fuse_norm_relu(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
