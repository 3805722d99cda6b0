// Moves every matrix product off aten (whose fp32 matmul is the reference BLAS in Debian's
// libtorch) onto oneDNN, in the dtype the graph computes in:
//  - a product with a constant 2-D right operand (matmul, mm, or addmm with a constant bias
//    and beta = alpha = 1, as Hugging Face's Conv1D writes a linear) becomes aten::linear with
//    the transposed constant, which weights_prepack then prepacks;
//  - a product of two activations (matmul, mm, bmm, baddbmm with constant beta and alpha, and
//    two-operand einsum equations that are a batched matmul: one row, one column and one
//    contracted index, any batch indices) becomes ipex::matmul, with permutes where the
//    equation asks.
// Run after cast_to_lowp (constants already in the compute dtype) and before weights_prepack.
// Needs libipex_ops.so at run time (prepacked mode only).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult replace_matmul(std::shared_ptr<torch::jit::Graph> &graph);

// Two-operand einsums that are a batched matmul (as above) become permutes around an
// aten::matmul, so fuse_attention sees attention written with einsum as the products it
// matches (what it leaves, replace_matmul then moves to ipex::matmul).
PassResult einsum_to_matmul(std::shared_ptr<torch::jit::Graph> &graph);

// After weights_prepack: every aten::linear left (its weight is not a constant, e.g. a slice of
// nn.MultiheadAttention's packed in-projection split at run time) becomes
// ipex::matmul(x, weight.t()) plus the bias, so it too runs on oneDNN.
PassResult remaining_linears_to_matmul(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
