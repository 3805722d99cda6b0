// Keeps aten::view working on tensors whose layout the optimized graph changed: convolutions
// (prepacked or converted to channels-last) hand on channels-last activations, and a view
// that merges the channel dim with the spatial ones (`x.view(n, -1)` after the last conv)
// needs the standard layout the original had. Before each aten::view / aten::view_as whose
// input may carry such a layout (computed from a convolution, and not since reset by a linear,
// a matmul or a contiguous()), inserts ipex::contiguous_for_view (ops/layout_op.h: the tensor
// itself where the view works on its own strides, else a contiguous copy) in a graph that has
// ipex ops, aten::contiguous in one without (--portable), and
// makes the view and every later reader use that tensor, so aliasing between the
// view and its base stays as in the original. Free at run time for tensors already contiguous.
// count = views covered.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult contiguous_before_view(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
