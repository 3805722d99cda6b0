#include "passes/fold_linear_bn.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>

#include <optional>
#include <string>
#include <vector>

#include "passes/bn_folding.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

// The only rank at which BatchNorm1d's channel dim is the linear's feature dim.
constexpr size_t kFoldableRank = 2;
constexpr size_t kLinearWeightRank = 2;

struct LinearParams {
    at::Tensor weight;  // [out, in]
    at::Tensor bias;    // undefined when the linear has none
};

std::optional<LinearParams> read_linear(const Node *linear, std::string *why_not) {
    const auto weight = constant_tensor(input_named(linear, "weight"));
    if (!weight) {
        *why_not = "linear weight is not a constant (freeze the model first)";
        return std::nullopt;
    }
    if (!weight->is_floating_point() || weight->dim() != kLinearWeightRank) {
        *why_not = "linear weight is not a floating 2-D tensor";
        return std::nullopt;
    }
    LinearParams p{*weight, at::Tensor()};
    Value *bias_value = input_named(linear, "bias");
    if (const auto bias = constant_tensor(bias_value)) {
        if (bias->dim() != 1 || bias->numel() != weight->size(0)) {
            *why_not = "linear bias length differs from its output features";
            return std::nullopt;
        }
        p.bias = *bias;
    } else if (!is_constant_none(bias_value)) {
        *why_not = "linear bias is not a constant";
        return std::nullopt;
    }
    return p;
}

std::optional<size_t> linear_rank(const Node *linear) {
    if (const auto rank = known_rank(linear->input(0))) return rank;
    return known_rank(linear->output());
}

// Emits aten::linear(input, weight', bias') at the current insertion point.
Value *insert_folded_linear(torch::jit::Graph &graph, Node *linear, const Node *bn, const LinearParams &p,
                            const BatchNormAffine &affine) {
    const at::Tensor w = p.weight.to(at::kDouble) * affine.scale.unsqueeze(1);
    const bool has_bias = p.bias.defined();
    const at::Tensor b_old = has_bias ? p.bias.to(at::kDouble) : at::zeros({p.weight.size(0)}, at::kDouble);
    const at::Tensor b = b_old * affine.scale + affine.shift;
    const at::ScalarType bias_dtype = has_bias ? p.bias.scalar_type() : p.weight.scalar_type();
    Value *weight = insert_folded_constant(graph, w.to(p.weight.scalar_type()), linear, "weight");
    Value *bias = insert_folded_constant(graph, b.to(bias_dtype), linear, "bias");
    Node *folded = graph.insertNode(graph.create(c10::aten::linear, {linear->input(0), weight, bias}));
    folded->copyMetadata(linear);
    folded->output()->setType(bn->output()->type());
    return folded->output();
}

// The batch_norm's inputs besides x, usable at the linear's position: constants defined
// later in the block are re-created at the top of the graph.
std::optional<std::vector<Value *>> bn_inputs_at(torch::jit::Graph &graph, const Node *bn, const Node *linear) {
    auto dominates = [&](const Value *input) {
        const Node *producer = input->node();
        return producer->owningBlock() != linear->owningBlock() || producer->isBefore(linear);
    };
    for (size_t i = 1; i < bn->inputs().size(); ++i)
        if (!dominates(bn->input(i)) && !torch::jit::toIValue(bn->input(i))) return std::nullopt;
    std::vector<Value *> inputs;
    for (size_t i = 1; i < bn->inputs().size(); ++i) {
        Value *input = bn->input(i);
        inputs.push_back(dominates(input) ? input
                                          : insert_constant_at_top(graph, *torch::jit::toIValue(input), input->node()));
    }
    return inputs;
}

// At the linear's position: if x.dim() == 2: the folded linear, else: linear + batch_norm.
Value *insert_guarded(torch::jit::Graph &graph, Node *linear, Node *bn, const std::vector<Value *> &bn_inputs,
                      const LinearParams &p, const BatchNormAffine &affine) {
    torch::jit::WithInsertPoint at_linear(linear);
    Value *x = linear->input(0);
    Node *dim = graph.insertNode(graph.create(c10::aten::dim, {x}));
    dim->output()->setType(c10::IntType::get());
    Value *two = graph.insertConstant(static_cast<int64_t>(kFoldableRank));
    Node *is_2d = graph.insertNode(graph.create(c10::aten::eq, {dim->output(), two}));
    is_2d->output()->setType(c10::BoolType::get());
    Node *branch = graph.insertNode(graph.create(c10::prim::If, {is_2d->output()}, 1));
    branch->copyMetadata(bn);
    branch->output()->setType(bn->output()->type());
    torch::jit::Block *folded_block = branch->addBlock();
    torch::jit::Block *original_block = branch->addBlock();
    {
        torch::jit::WithInsertPoint inside(folded_block);
        folded_block->registerOutput(insert_folded_linear(graph, linear, bn, p, affine));
    }
    torch::jit::WithInsertPoint inside(original_block);
    Node *linear_copy = graph.insertNode(graph.create(c10::aten::linear, linear->inputs()));
    linear_copy->copyMetadata(linear);
    linear_copy->output()->setType(linear->output()->type());
    std::vector<Value *> inputs = {linear_copy->output()};
    inputs.insert(inputs.end(), bn_inputs.begin(), bn_inputs.end());
    Node *bn_copy = graph.insertNode(graph.create(c10::aten::batch_norm, inputs));
    bn_copy->copyMetadata(bn);
    bn_copy->output()->setType(bn->output()->type());
    original_block->registerOutput(bn_copy->output());
    return branch->output();
}

}  // namespace

PassResult fold_linear_bn(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    const auto bns = collect_nodes_of_kind(graph->block(), {c10::aten::batch_norm});
    for (Node *bn : bns) {
        Node *linear = bn->input(0)->node();
        if (linear->kind() != c10::aten::linear) continue;
        const std::string label = node_label(linear) + " -> " + node_label(bn);
        if (is_graph_output(linear->output())) {
            result.skipped.push_back(label + ": linear output is also returned by the graph");
            continue;
        }
        if (!only_shape_queries_besides(linear->output(), bn)) {
            result.skipped.push_back(label + ": linear output has other users besides the batch_norm");
            continue;
        }
        std::string why_not;
        const auto affine = read_batch_norm(bn, &why_not);
        const auto params = affine ? read_linear(linear, &why_not) : std::nullopt;
        if (!affine || !params) {
            result.skipped.push_back(label + ": " + why_not);
            continue;
        }
        if (params->weight.size(0) != affine->channels) {
            result.skipped.push_back(label + ": linear has " + std::to_string(params->weight.size(0)) +
                                     " output features but batch_norm has " + std::to_string(affine->channels));
            continue;
        }
        const auto rank = linear_rank(linear);
        if (rank && *rank != kFoldableRank) {
            result.skipped.push_back(label + ": input is " + std::to_string(*rank) +
                                     "-D; batch_norm then normalizes dim 1, not the linear's features");
            continue;
        }
        std::optional<std::vector<Value *>> bn_inputs;
        if (!rank) {
            bn_inputs = bn_inputs_at(*graph, bn, linear);
            if (!bn_inputs) {
                result.skipped.push_back(label + ": batch_norm arguments are computed after the linear");
                continue;
            }
        }
        // Both forms replace the linear where it stands; its shape queries and the
        // batch_norm's users read the replacement, which has the same shape.
        Value *replacement = nullptr;
        if (rank) {
            torch::jit::WithInsertPoint at_linear(linear);
            replacement = insert_folded_linear(*graph, linear, bn, *params, *affine);
        } else {
            replacement = insert_guarded(*graph, linear, bn, *bn_inputs, *params, *affine);
        }
        // Labels are read before the nodes are freed.
        result.modules.push_back(node_label(linear));
        result.modules.push_back(node_label(bn));
        bn->output()->replaceAllUsesWith(replacement);
        bn->destroy();
        linear->output()->replaceAllUsesWith(replacement);
        linear->destroy();
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
