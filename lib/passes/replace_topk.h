// aten::topk(self, k, dim, largest, sorted) -> ipex::topk(the same) (ops/topk_op.h: aten's
// results, with a heap per thread over the row in place for the k largest of a long fp32 row,
// the detectors' top 1000 of millions of class scores; aten::topk itself for every other case,
// decided at run time). Equal values come lowest index first, an order aten leaves unspecified.
// Prepacked mode only (the op lives in libipex_ops.so); after cast_to_lowp, which knows the aten
// op's dtype rule. count = ops replaced.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult replace_topk(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
