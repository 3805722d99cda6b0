#include "quant/smooth_quant.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "ir/graph_utils.h"

namespace ipex::quant {
namespace {

using torch::jit::Node;
using torch::jit::Value;

constexpr double kMinFactor = 1e-5;
constexpr double kMaxFactor = 1e5;

at::Tensor factor_tensor(const std::vector<double> &factors, const at::Tensor &like) {
    return at::tensor(factors, at::TensorOptions().dtype(at::kDouble)).to(like.scalar_type());
}

// Replaces input `index` of `node` by a new constant holding `value`.
void replace_constant_input(torch::jit::Graph &graph, Node *node, size_t index, const at::Tensor &value) {
    Value *c = passes::insert_constant_at_top(graph, value, node->input(index)->node());
    node->replaceInput(index, c);
}

// A layer_norm with constant affine parameters whose every user is one of `users`.
bool foldable_layer_norm(const Value *input, const std::vector<const Node *> &users) {
    const Node *ln = input->node();
    if (ln->kind() != c10::Symbol::aten("layer_norm") || ln->inputs().size() < 4) return false;
    if (!passes::constant_tensor(ln->input(2)) || !passes::constant_tensor(ln->input(3))) return false;
    if (passes::is_graph_output(input)) return false;
    for (const auto &use : input->uses())
        if (std::find(users.begin(), users.end(), use.user) == users.end()) return false;
    return true;
}

// A producer linear (constant weight and bias), possibly behind a relu (relu(x)/s equals
// relu(x/s) for s > 0), whose output only the group reads: 1/s goes into its output rows.
Node *foldable_linear(Value *input, const std::vector<const Node *> &users) {
    if (passes::is_graph_output(input)) return nullptr;
    for (const auto &use : input->uses())
        if (std::find(users.begin(), users.end(), use.user) == users.end()) return nullptr;
    Node *node = input->node();
    if (node->kind() == c10::Symbol::aten("relu")) {
        Value *pre = node->input(0);
        if (pre->uses().size() != 1 || passes::is_graph_output(pre)) return nullptr;
        node = pre->node();
    }
    if (node->kind() != c10::Symbol::aten("linear")) return nullptr;
    const auto w = passes::constant_tensor(node->input(1));
    if (!w || w->dim() != 2) return nullptr;
    if (!passes::is_constant_none(node->input(2)) && !passes::constant_tensor(node->input(2))) return nullptr;
    return node;
}

}  // namespace

std::vector<SmoothGroup> smooth_groups(const std::vector<QuantOp> &ops) {
    std::vector<SmoothGroup> groups;
    for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].kind != "linear" && ops[i].kind != "matmul") continue;
        auto it = std::find_if(groups.begin(), groups.end(),
                               [&](const SmoothGroup &g) { return g.input == ops[i].input; });
        if (it == groups.end()) groups.push_back({ops[i].input, {i}});
        else it->ops.push_back(i);
    }
    return groups;
}

std::vector<double> smooth_factors(const at::Tensor &activation_channel_max,
                                   const std::vector<at::Tensor> &weights, double alpha) {
    at::Tensor wmax;
    for (const auto &w : weights) {
        const at::Tensor m = w.detach().abs().amax(0).to(at::kDouble);
        wmax = wmax.defined() ? at::maximum(wmax, m) : m;
    }
    const at::Tensor amax = activation_channel_max.to(at::kDouble).contiguous();
    TORCH_CHECK(amax.numel() == wmax.numel(), "smooth_factors: channel count mismatch");
    wmax = wmax.contiguous();
    std::vector<double> out(static_cast<size_t>(amax.numel()));
    for (size_t j = 0; j < out.size(); ++j) {
        const double a = amax.data_ptr<double>()[j], w = wmax.data_ptr<double>()[j];
        double s = (a > 0.0 && w > 0.0) ? std::pow(a, alpha) / std::pow(w, 1.0 - alpha) : 1.0;
        out[j] = std::isfinite(s) ? std::clamp(s, kMinFactor, kMaxFactor) : 1.0;
    }
    return out;
}

std::string apply_smoothing(torch::jit::Graph &graph, const SmoothGroup &group,
                            const std::vector<QuantOp> &ops, const std::vector<double> &factors) {
    std::vector<const Node *> users;
    for (size_t i : group.ops) users.push_back(ops[i].node);
    // Weights: scale input channel j by s_j (matmul holds W^T: rows are input channels).
    for (size_t i : group.ops) {
        const QuantOp &op = ops[i];
        const at::Tensor w = *passes::constant_tensor(op.node->input(1));
        const at::Tensor s = factor_tensor(factors, w);
        replace_constant_input(graph, op.node, 1, op.kind == "matmul" ? w * s.unsqueeze(1) : w * s);
    }
    Value *input = group.input;
    if (foldable_layer_norm(input, users)) {
        Node *ln = input->node();
        const at::Tensor lw = *passes::constant_tensor(ln->input(2));
        const at::Tensor lb = *passes::constant_tensor(ln->input(3));
        const at::Tensor s = factor_tensor(factors, lw);
        replace_constant_input(graph, ln, 2, lw / s);
        replace_constant_input(graph, ln, 3, lb / s);
        return "layer_norm";
    }
    if (Node *linear = foldable_linear(input, users)) {
        const at::Tensor w = *passes::constant_tensor(linear->input(1));
        const at::Tensor s = factor_tensor(factors, w);
        replace_constant_input(graph, linear, 1, w / s.unsqueeze(1));
        if (!passes::is_constant_none(linear->input(2)))
            replace_constant_input(graph, linear, 2, *passes::constant_tensor(linear->input(2)) / s);
        return "linear";
    }
    const at::Tensor inv = 1.0 / at::tensor(factors, at::TensorOptions().dtype(at::kDouble)).to(at::kFloat);
    Value *c = passes::insert_constant_at_top(graph, inv, users.front());
    Node *first = ops[group.ops.front()].node;
    Node *mul = graph.create(c10::Symbol::aten("mul"), {input, c});
    mul->output()->setType(input->type());
    mul->setSourceRange(first->sourceRange());
    // Right after the definition of the input (constants are at the top): dominates every use.
    if (input->node()->kind() == c10::prim::Param) mul->insertAfter(c->node());
    else mul->insertAfter(input->node());
    for (size_t i : group.ops) ops[i].node->replaceInput(0, mul->output());
    return "mul";
}

}  // namespace ipex::quant
