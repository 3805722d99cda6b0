// Pooling where libtorch 1.13's kernels are slow on the layouts and dtypes optimize leaves:
//
//   aten::max_pool2d(x, k, s, p, d, ceil)     ->  ipex::max_pool2d(x, k, s, p, d, ceil)
//       (ops/pool_op.h: oneDNN's pooling for fp32/bf16 NCHW or channels-last input, aten's
//       own kernel for the rest; prepacked mode only, the op lives in libipex_ops.so)
//   aten::adaptive_avg_pool2d(x, [1, 1])      ->  aten::mean(x, [-1, -2], keepdim=True)
//       (the global average pool of a classifier head or a squeeze-excitation block: the same
//       numbers by definition, and libtorch's bf16 channels-last adaptive pool is ~50x slower
//       than its mean; portable mode), and in prepacked mode
//                                             ->  ipex::spatial_mean(x, [-1, -2], True)
//   aten::mean(x, dims, keepdim)              ->  ipex::spatial_mean(x, dims, keepdim)
//       (dims constant, the last two of a 4-D tensor, no dtype: ops/pool_op.h, the own kernel
//       for fp32/bf16 channels-last input, aten::mean for the rest; prepacked mode only)
// Run after cast_to_lowp, which knows the aten ops' dtype rules.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

// details: {"max_pool2d": n, "global_avg_pool": n, "spatial_mean": n}; count: nodes replaced
PassResult replace_pooling(std::shared_ptr<torch::jit::Graph> &graph, bool prepacked);

}  // namespace ipex::passes
