// Runs compute-bound ops (conv, linear, matmul family, embedding) in bf16/fp16. Needs a frozen
// graph (constant weights become low-precision constants); no-op when no op would run in the
// low dtype; throws an unsupported error, before any change, when libtorch has no CPU kernels
// for `dtype`.
// Activations get a cast in front of those ops; numerically sensitive ops (softmax, norms,
// accumulating reductions, losses) and ops without a low-precision kernel get their floating
// inputs cast to fp32; other ops run in the dtype that reaches them. Integer tensors are never
// cast. Graph inputs are unchanged; floating outputs (also inside tuples/lists/dicts) are cast
// back to fp32 unless keep_dtype_outputs. count = ops converted; modules = their module paths.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult cast_to_lowp(std::shared_ptr<torch::jit::Graph> &graph, at::ScalarType dtype,
                        bool keep_dtype_outputs);

}  // namespace ipex::passes
