// Reads an inference batch_norm as a per-channel affine map y = x * scale + shift, for the
// passes that fold it into the producer of x (fold_conv_bn, fold_linear_bn).
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

// Graph value for a folded tensor, inserted at the top of the graph and named
// "<module>.<what>_fused_bn" after the module it came from.
torch::jit::Value *insert_folded_constant(torch::jit::Graph &graph, const at::Tensor &tensor,
                                          const torch::jit::Node *origin, const std::string &what);

}  // namespace ipex::passes
