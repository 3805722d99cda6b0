#include "passes/fold_conv_bn.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "passes/bn_folding.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Smallest conv weight rank: [out, in/groups, k] for conv1d.
constexpr int64_t kMinConvWeightRank = 3;

// What the fold needs from the conv, read before anything is changed.
struct ConvParams {
    at::Tensor weight;
    at::Tensor bias;  // undefined when the conv has none
    int64_t groups = 1;
    bool transposed = false;
    int64_t out_channels = 0;
};

std::optional<ConvParams> read_conv(const Node *conv, std::string *why_not) {
    auto fail = [&](const std::string &why) -> std::optional<ConvParams> {
        *why_not = why;
        return std::nullopt;
    };
    ConvParams p;
    const auto weight = constant_tensor(input_named(conv, "weight"));
    if (!weight) return fail("conv weight is not a constant (freeze the model first)");
    if (!weight->is_floating_point() || weight->dim() < kMinConvWeightRank)
        return fail("conv weight is not a floating tensor of rank >= 3");
    p.weight = *weight;
    Value *bias_value = input_named(conv, "bias");
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

// Weight scaled per output channel; scale is fp64 [out_channels].
at::Tensor scale_weight(const ConvParams &p, const at::Tensor &scale) {
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

}  // namespace

PassResult fold_conv_bn(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    const auto bns = collect_nodes_of_kind(graph->block(), {c10::Symbol::fromQualString("aten::batch_norm")});
    for (Node *bn : bns) {
        Node *conv = bn->input(0)->node();
        if (!is_aten_conv(conv)) continue;
        const std::string label = node_label(conv) + " -> " + node_label(bn);
        Value *conv_out = conv->output();
        if (is_graph_output(conv_out)) {
            result.skipped.push_back(label + ": conv output is also returned by the graph");
            continue;
        }
        if (!only_shape_queries_besides(conv_out, bn)) {
            result.skipped.push_back(label + ": conv output has other users besides the batch_norm");
            continue;
        }
        std::string why_not;
        const auto affine = read_batch_norm(bn, &why_not);
        if (!affine) {
            result.skipped.push_back(label + ": " + why_not);
            continue;
        }
        const auto params = read_conv(conv, &why_not);
        if (!params) {
            result.skipped.push_back(label + ": " + why_not);
            continue;
        }
        if (params->out_channels != affine->channels) {
            result.skipped.push_back(label + ": conv has " + std::to_string(params->out_channels) +
                                     " output channels but batch_norm has " +
                                     std::to_string(affine->channels));
            continue;
        }

        const at::Tensor weight = scale_weight(*params, affine->scale);
        const bool has_bias = params->bias.defined();
        const at::ScalarType bias_dtype = has_bias ? params->bias.scalar_type() : params->weight.scalar_type();
        const at::Tensor old_bias =
            has_bias ? params->bias.to(at::kDouble) : at::zeros({params->out_channels}, at::kDouble);
        const at::Tensor bias = (old_bias * affine->scale + affine->shift).to(bias_dtype);

        Value *weight_value = insert_folded_constant(*graph, weight, conv, "weight");
        Value *bias_value = insert_folded_constant(*graph, bias, conv, "bias");
        conv->replaceInput(*input_index(conv, "weight"), weight_value);
        conv->replaceInput(*input_index(conv, "bias"), bias_value);
        // Labels are read before the batch_norm node is freed.
        result.modules.push_back(node_label(conv));
        result.modules.push_back(node_label(bn));
        bn->output()->replaceAllUsesWith(conv_out);
        bn->destroy();
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
