// Runs a frozen graph's compute-bound ops (conv, linear, matmul family, embedding) in bf16 or
// fp16: their constant weights become low-precision constants and their activations get a
// cast in front; numerically sensitive ops (softmax, norms, reductions, losses) and ops
// without a low-precision kernel get their floating inputs cast back to fp32. Other ops run in
// the dtype that reaches them. Integer tensors are never cast. Graph inputs are unchanged;
// floating outputs (also inside tuples/lists/dicts) are cast back to fp32 unless
// keep_dtype_outputs. No-op when the graph has no op that would run in the low dtype.
// Throws an unsupported error (before any change) when libtorch has no CPU kernels for dtype.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "passes/pass_result.h"

namespace ipex::passes {

PassResult cast_to_lowp(std::shared_ptr<torch::jit::Graph> &graph, at::ScalarType dtype,
                        bool keep_dtype_outputs);

}  // namespace ipex::passes
