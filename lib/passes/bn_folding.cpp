#include "passes/bn_folding.h"

#include <ATen/ATen.h>

#include "ir/graph_utils.h"

namespace ipex::passes {

std::optional<BatchNormAffine> read_batch_norm(const torch::jit::Node *bn, std::string *why_not) {
    auto fail = [&](const std::string &why) -> std::optional<BatchNormAffine> {
        *why_not = why;
        return std::nullopt;
    };
    const auto training = constant_bool(input_named(bn, "training"));
    if (!training) return fail("batch_norm training flag is not a constant");
    if (*training) return fail("batch_norm runs in training mode (batch statistics)");
    const auto mean = constant_tensor(input_named(bn, "running_mean"));
    const auto var = constant_tensor(input_named(bn, "running_var"));
    if (!mean || !var) return fail("batch_norm running statistics are not constants");
    const auto eps = constant_double(input_named(bn, "eps"));
    if (!eps) return fail("batch_norm eps is not a constant");
    torch::jit::Value *weight_value = input_named(bn, "weight");
    torch::jit::Value *bias_value = input_named(bn, "bias");
    const auto weight = constant_tensor(weight_value);
    const auto bias = constant_tensor(bias_value);
    if (!weight && !is_constant_none(weight_value)) return fail("batch_norm weight is not a constant");
    if (!bias && !is_constant_none(bias_value)) return fail("batch_norm bias is not a constant");

    const int64_t channels = mean->numel();
    auto is_vector = [&](const at::Tensor &t) {
        return t.dim() == 1 && t.numel() == channels && t.is_floating_point();
    };
    if (!is_vector(*mean) || !is_vector(*var) ||
        (weight && !is_vector(*weight)) || (bias && !is_vector(*bias)))
        return fail("batch_norm parameters are not floating vectors of one length");

    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const at::Tensor gamma = weight ? weight->to(at::kDouble) : at::ones({channels}, f64);
    const at::Tensor beta = bias ? bias->to(at::kDouble) : at::zeros({channels}, f64);
    BatchNormAffine affine;
    affine.channels = channels;
    affine.scale = gamma * at::rsqrt(var->to(at::kDouble) + *eps);
    affine.shift = beta - mean->to(at::kDouble) * affine.scale;
    return affine;
}

torch::jit::Value *insert_folded_constant(torch::jit::Graph &graph, const at::Tensor &tensor,
                                          const torch::jit::Node *origin, const std::string &what) {
    torch::jit::Value *value = insert_constant_at_top(graph, tensor, origin);
    const std::string path = module_path(origin);
    value->setDebugName((path.empty() ? std::string("folded") : path) + "." + what + "_fused_bn");
    return value;
}

}  // namespace ipex::passes
