#include "passes/fuse_eltwise.h"

#include <limits>

#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;

// Strips the in-place underscore: "aten::relu_" -> "relu".
std::string base_name(const Node *node) {
    std::string name = node->kind().toUnqualString();
    if (!name.empty() && name.back() == '_') name.pop_back();
    return name;
}

// A constant Scalar argument, or `fallback` when it is None.
std::optional<double> scalar_or(const Node *node, const char *name, double fallback) {
    const auto *value = input_named(node, name);
    if (!value) return std::nullopt;
    if (is_constant_none(value)) return fallback;
    return constant_double(value);
}

// The post-op an elementwise node computes, or why it cannot be one.
std::optional<ops::PostOp> as_post_op(const Node *node, std::string *why) {
    if (node->kind().ns().toUnqualString() != std::string("aten") || node->outputs().size() != 1) return std::nullopt;
    const std::string name = base_name(node);
    constexpr double kLowest = std::numeric_limits<float>::lowest();
    constexpr double kHighest = std::numeric_limits<float>::max();
    if (name == "relu") return ops::PostOp{"relu"};
    if (name == "silu") return ops::PostOp{"silu"};
    if (name == "sigmoid") return ops::PostOp{"sigmoid"};
    if (name == "tanh") return ops::PostOp{"tanh"};
    if (name == "hardswish") return ops::PostOp{"hardswish"};
    if (name == "relu6") return ops::PostOp{"clip", 0.0, 6.0};
    if (name == "leaky_relu") {
        const auto slope = scalar_or(node, "negative_slope", 0.01);
        if (slope) return ops::PostOp{"leaky_relu", *slope};
        *why = "negative_slope is not a constant";
    } else if (name == "hardtanh") {
        const auto lo = scalar_or(node, "min_val", -1.0), hi = scalar_or(node, "max_val", 1.0);
        if (lo && hi) return ops::PostOp{"clip", *lo, *hi};
        *why = "bounds are not constants";
    } else if (name == "clamp") {
        const auto lo = scalar_or(node, "min", kLowest), hi = scalar_or(node, "max", kHighest);
        const bool scalars = input_named(node, "min") && input_named(node, "min")->type()->kind() != c10::TypeKind::TensorType;
        if (lo && hi && scalars) return ops::PostOp{"clip", *lo, *hi};
        *why = "bounds are not constant scalars";
    } else if (name == "gelu") {
        const auto *approximate = input_named(node, "approximate");
        const auto mode = approximate ? torch::jit::toIValue(approximate) : c10::optional<c10::IValue>(c10::IValue("none"));
        if (mode && mode->isString() && mode->toStringRef() == "none") return ops::PostOp{"gelu_erf"};
        if (mode && mode->isString() && mode->toStringRef() == "tanh") return ops::PostOp{"gelu_tanh"};
        *why = "approximate is not a constant 'none' or 'tanh'";
    } else if (name == "elu") {
        const auto alpha = scalar_or(node, "alpha", 1.0), scale = scalar_or(node, "scale", 1.0),
                   input_scale = scalar_or(node, "input_scale", 1.0);
        if (alpha && scale == 1.0 && input_scale == 1.0) return ops::PostOp{"elu", *alpha};
        *why = "only elu with constant alpha and scale 1 fuses";
    }
    return std::nullopt;
}

}  // namespace

PassResult fuse_eltwise(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    std::vector<Node *> prepacked;
    for (Node *node : collect_nodes(graph->block()))
        if (is_prepacked(node)) prepacked.push_back(node);
    for (Node *node : prepacked) {
        // Fold a chain (conv -> relu -> ...) one user at a time.
        while (Node *user = single_user(node->output())) {
            if (user->inputs().empty() || user->input(0) != node->output()) break;
            std::string why;
            const auto post_op = as_post_op(user, &why);
            if (!post_op) {
                if (!why.empty())
                    result.skipped.push_back(node_label(user) + ": " + user->kind().toQualString() + " kept (" + why + ")");
                break;
            }
            if (is_prepacked_conv(node))
                set_context(*graph, node, c10::IValue(conv_context(node)->with_post_ops({*post_op}, false)));
            else
                set_context(*graph, node, c10::IValue(linear_context(node)->with_post_ops({*post_op})));
            user->output()->replaceAllUsesWith(node->output());
            result.modules.push_back(node_label(node) + "+" + user->kind().toUnqualString());
            user->destroy();
            ++result.count;
        }
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
