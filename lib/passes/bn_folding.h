// Reads an inference batch_norm as a per-channel affine map y = x * scale + shift, and a
// convolution as what folding such a map into it needs, for the passes that fold one into the
// producer of x (fold_conv_bn, fold_conv_frozen_bn, fold_linear_bn).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>

namespace ipex::passes {

struct BatchNormAffine {
    at::Tensor scale;  // fp64, [channels]: weight / sqrt(running_var + eps)
    at::Tensor shift;  // fp64, [channels]: bias - running_mean * scale
    int64_t channels = 0;
};

// The affine form of an aten::batch_norm node whose training flag is constant false and
// whose weight/bias (or None), running stats and eps are constants. Otherwise nullopt, with
// the reason in *why_not.
std::optional<BatchNormAffine> read_batch_norm(const torch::jit::Node *bn, std::string *why_not);

// What folding into an aten convolution needs from it, read before anything is changed.
struct ConvFoldParams {
    at::Tensor weight;
    at::Tensor bias;  // undefined when the conv has none
    int64_t groups = 1;
    bool transposed = false;
    int64_t out_channels = 0;
};

// The constant weight (floating, rank >= 3), bias (or None), groups and transposed flag of an
// aten convolution; otherwise nullopt, with the reason in *why_not.
std::optional<ConvFoldParams> read_conv_for_folding(const torch::jit::Node *conv, std::string *why_not);

// The weight scaled per output channel (scale: fp64 [out_channels]), in the weight's dtype.
at::Tensor scale_conv_weight(const ConvFoldParams &p, const at::Tensor &scale);

// Graph value for a folded tensor, inserted at the top of the graph and named
// "<module>.<what>_fused_bn" after the module it came from.
torch::jit::Value *insert_folded_constant(torch::jit::Graph &graph, const at::Tensor &tensor,
                                          const torch::jit::Node *origin, const std::string &what);

}  // namespace ipex::passes
