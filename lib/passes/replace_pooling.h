// Pooling where libtorch 1.13's kernels are slow on the layouts and dtypes optimize leaves:
//
//   aten::max_pool2d(x, k, s, p, d, ceil)     ->  ipex::max_pool2d(x, k, s, p, d, ceil)
//       (ops/pool_op.h: oneDNN's pooling for fp32/bf16 NCHW or channels-last input, aten's
//       own kernel for the rest; prepacked mode only, the op lives in libipex_ops.so)
//   aten::adaptive_avg_pool2d(x, [1, 1])      ->  aten::mean(x, [-1, -2], keepdim=True)
//       (the global average pool of a classifier head or a squeeze-excitation block: the same
//       numbers by definition, and libtorch's bf16 channels-last adaptive pool is ~50x slower
//       than its mean; both modes)
// Run after cast_to_lowp, which knows the aten ops' dtype rules.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "passes/pass_result.h"

namespace ipex::passes {

// details: {"max_pool2d": n, "global_avg_pool": n}
PassResult replace_pooling(std::shared_ptr<torch::jit::Graph> &graph, bool prepacked);

}  // namespace ipex::passes
