// SmoothQuant for linear/matmul ops: per input channel j a factor
//   s_j = max|X_j|^alpha / max|W_:,j|^(1 - alpha)
// moves quantization difficulty from activations to weights: W' = W * s, X' = X / s.
// The 1/s is folded into a preceding layer_norm (weight and bias) or linear (output rows
// and bias, also through a relu) when the group is the only reader of its output, else
// applied by an inserted aten::mul.
// Linears reading the same value form one group and share factors.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/ir/ir.h>

#include <map>
#include <string>
#include <vector>

#include "quant/quant_graph.h"

namespace ipex::quant {

struct SmoothGroup {
    torch::jit::Value *input = nullptr;
    std::vector<size_t> ops;  // indices into the op list
};

// Groups of linear/matmul ops by the value they read (program order).
std::vector<SmoothGroup> smooth_groups(const std::vector<QuantOp> &ops);

// Factors from the activation channel maxima and the group's weights ([out, in] each).
std::vector<double> smooth_factors(const at::Tensor &activation_channel_max,
                                   const std::vector<at::Tensor> &weights, double alpha);

// Rewrites the graph for one group; returns "layer_norm", "linear" or "mul" (where 1/s went).
// The caller re-finds the ops afterwards (find_quant_ops), their inputs and weights changed.
std::string apply_smoothing(torch::jit::Graph &graph, const SmoothGroup &group,
                            const std::vector<QuantOp> &ops, const std::vector<double> &factors);

}  // namespace ipex::quant
