#include "passes/fold_conv_frozen_bn.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "ir/graph_utils.h"
#include "passes/bn_folding.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// The affine op's two operands: the convolution's output and the per-channel constant.
struct Operands {
    Node *conv = nullptr;
    at::Tensor constant;
};

bool is_kind(const Node *node, const char *kind) { return node->kind() == c10::Symbol::fromQualString(kind); }

// The channels of `constant` as a per-channel factor of a convolution's output of `rank` dims
// (channel dim 1): a [C] vector (fp64), or nullopt with the reason.
std::optional<at::Tensor> per_channel(const at::Tensor &constant, int64_t rank, int64_t channels, std::string *why) {
    const int64_t dims = constant.dim();
    if (dims > rank) {
        *why = "the constant has more dims than the convolution's output";
        return std::nullopt;
    }
    const int64_t channel_dim = dims - (rank - 1);  // the output's dim 1, aligned from the right
    for (int64_t d = 0; d < dims; ++d) {
        if (d == channel_dim && (constant.size(d) == channels || constant.size(d) == 1)) continue;
        if (constant.size(d) != 1) {
            *why = "the constant is not per-channel";
            return std::nullopt;
        }
    }
    return constant.to(at::kDouble).reshape({-1}).expand({channels}).contiguous();
}

// mul(conv, c) / mul(c, conv), add(conv, c, alpha), sub(conv, c, alpha): which operand is the
// convolution's output and the other a tensor constant; nullopt when the node is not one.
std::optional<Operands> operands(Node *node) {
    const bool mul = is_kind(node, "aten::mul");
    if (!mul && !is_kind(node, "aten::add") && !is_kind(node, "aten::sub")) return std::nullopt;
    if (node->inputs().size() != (mul ? 2u : 3u)) return std::nullopt;
    for (size_t i = 0; i < (mul ? 2u : 1u); ++i) {
        Node *conv = node->input(i)->node();
        const auto constant = constant_tensor(node->input(1 - i));
        if (is_aten_conv(conv) && constant) return Operands{conv, *constant};
    }
    return std::nullopt;
}

}  // namespace

PassResult fold_conv_frozen_bn(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    const auto kinds = {c10::Symbol::fromQualString("aten::mul"), c10::Symbol::fromQualString("aten::add"),
                        c10::Symbol::fromQualString("aten::sub")};
    // Program order, so a mul folds before the add that reads it.
    for (Node *node : collect_nodes_of_kind(graph->block(), kinds)) {
        const auto ops = operands(node);
        if (!ops) continue;
        Node *conv = ops->conv;
        const std::string label = node_label(conv) + " -> " + node_label(node);
        Value *conv_out = conv->output();
        if (is_graph_output(conv_out) || conv_out->uses().size() != 1) {
            result.skipped.push_back(label + ": conv output has other users or is returned");
            continue;
        }
        std::string why;
        const auto params = read_conv_for_folding(conv, &why);
        if (!params) {
            result.skipped.push_back(label + ": " + why);
            continue;
        }
        if (ops->constant.scalar_type() != params->weight.scalar_type()) {
            result.skipped.push_back(label + ": the constant's dtype differs from the conv weight's");
            continue;
        }
        const int64_t rank = params->weight.dim();
        const auto input_rank = known_rank(conv->input(0));
        if (ops->constant.dim() == rank && input_rank && static_cast<int64_t>(*input_rank) != rank) {
            result.skipped.push_back(label + ": the conv input is unbatched; the constant would add a dim");
            continue;
        }
        const auto factor = per_channel(ops->constant, rank, params->out_channels, &why);
        if (!factor) {
            result.skipped.push_back(label + ": " + why);
            continue;
        }
        const bool has_bias = params->bias.defined();
        const at::ScalarType bias_dtype = has_bias ? params->bias.scalar_type() : params->weight.scalar_type();
        at::Tensor bias = has_bias ? params->bias.to(at::kDouble) : at::zeros({params->out_channels}, at::kDouble);
        at::Tensor weight = params->weight;
        if (is_kind(node, "aten::mul")) {
            weight = scale_conv_weight(*params, *factor);
            bias = bias * *factor;
        } else {
            const auto alpha = constant_double(node->input(2));
            if (!alpha) {
                result.skipped.push_back(label + ": alpha is not a constant");
                continue;
            }
            bias = bias + (is_kind(node, "aten::sub") ? -*alpha : *alpha) * *factor;
        }
        conv->replaceInput(*input_index(conv, "weight"), insert_folded_constant(*graph, weight, conv, "weight"));
        conv->replaceInput(*input_index(conv, "bias"),
                           insert_folded_constant(*graph, bias.to(bias_dtype), conv, "bias"));
        result.modules.push_back(node_label(conv));
        result.modules.push_back(node_label(node));
        node->output()->replaceAllUsesWith(conv_out);
        node->destroy();
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
