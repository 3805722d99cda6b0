#include "passes/bn_folding.h"

#include <ATen/ATen.h>

#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

// Smallest conv weight rank: [out, in/groups, k] for conv1d.
constexpr int64_t kMinConvWeightRank = 3;

}  // namespace

std::optional<ConvFoldParams> read_conv_for_folding(const torch::jit::Node *conv, std::string *why_not) {
    auto fail = [&](const std::string &why) -> std::optional<ConvFoldParams> {
        *why_not = why;
        return std::nullopt;
    };
    ConvFoldParams p;
    const auto weight = constant_tensor(input_named(conv, "weight"));
    if (!weight) return fail("conv weight is not a constant (freeze the model first)");
    if (!weight->is_floating_point() || weight->dim() < kMinConvWeightRank)
        return fail("conv weight is not a floating tensor of rank >= 3");
    p.weight = *weight;
    torch::jit::Value *bias_value = input_named(conv, "bias");
    if (const auto bias = constant_tensor(bias_value)) {
        p.bias = *bias;
    } else if (!is_constant_none(bias_value)) {
        return fail("conv bias is not a constant");
    }
    const auto groups = constant_int(input_named(conv, "groups"));
    if (!groups || *groups < 1) return fail("conv groups is not a positive constant");
    p.groups = *groups;
    const auto transposed = conv_transposed(conv);
    if (!transposed) return fail("conv transposed flag is not a constant");
    p.transposed = *transposed;
    if (p.transposed) {
        if (p.weight.size(0) % p.groups != 0) return fail("conv-transpose weight does not split into groups");
        p.out_channels = p.weight.size(1) * p.groups;
    } else {
        p.out_channels = p.weight.size(0);
    }
    if (p.bias.defined() && (p.bias.dim() != 1 || p.bias.numel() != p.out_channels))
        return fail("conv bias length differs from its output channels");
    return p;
}

at::Tensor scale_conv_weight(const ConvFoldParams &p, const at::Tensor &scale) {
    const at::Tensor w = p.weight.to(at::kDouble);
    std::vector<int64_t> shape(w.dim(), 1);
    if (!p.transposed) {
        shape[0] = p.out_channels;
        return (w * scale.reshape(shape)).to(p.weight.scalar_type());
    }
    // Transposed: [in, out/groups, k...] with the out channels of group g in rows
    // g*in/groups .. (g+1)*in/groups - 1, column j -> out channel g*out/groups + j.
    const int64_t in_per_group = w.size(0) / p.groups;
    const int64_t out_per_group = w.size(1);
    std::vector<int64_t> grouped = {p.groups, in_per_group};
    grouped.insert(grouped.end(), w.sizes().begin() + 1, w.sizes().end());
    std::vector<int64_t> scale_shape(grouped.size(), 1);
    scale_shape[0] = p.groups;
    scale_shape[2] = out_per_group;
    const at::Tensor scaled = w.reshape(grouped) * scale.reshape(scale_shape);
    return scaled.reshape(w.sizes()).to(p.weight.scalar_type());
}


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
