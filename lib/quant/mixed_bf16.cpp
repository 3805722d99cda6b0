#include "quant/mixed_bf16.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <map>
#include <set>

#include "passes/cast_to_lowp.h"
#include "ir/graph_utils.h"

namespace ipex::quant {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kDequantize = c10::Symbol::aten("dequantize");

Value *insert_to(torch::jit::Graph &graph, Value *v, at::ScalarType dtype) {
    Value *out = graph.insert(c10::aten::to, {v, dtype});
    const auto type = v->type()->cast<c10::TensorType>();
    out->setType(type ? type->withScalarType(dtype) : c10::TensorType::get());
    return out;
}

// aten::to(x, dtype, ...) with a constant dtype, else nullopt.
std::optional<at::ScalarType> cast_dtype(const Node *node) {
    if (node->kind() != c10::aten::to || node->inputs().size() < 2) return std::nullopt;
    const auto dtype = passes::constant_int(node->input(1));
    if (!dtype) return std::nullopt;
    return static_cast<at::ScalarType>(*dtype);
}

// to(to(x, bf16), fp32) -> x for values known to be fp32 (no rounding through bf16).
void drop_round_trips(torch::jit::Graph &graph, const std::set<Value *> &fp32_values) {
    for (Node *node : passes::collect_nodes(graph.block())) {
        if (cast_dtype(node) != at::kFloat) continue;
        Node *inner = node->input(0)->node();
        if (cast_dtype(inner) != at::kBFloat16 || !fp32_values.count(inner->input(0))) continue;
        node->output()->replaceAllUsesWith(inner->input(0));
        node->destroy();
        if (!inner->hasUses()) inner->destroy();
    }
}

}  // namespace

MixedBf16Result run_outside_int8_in_bf16(std::shared_ptr<torch::jit::Graph> &graph,
                                         const std::vector<Node *> &keep_fp32, bool ipex_ops) {
    MixedBf16Result result;
    // The kept ops' inputs as they are now, before any cast exists.
    // Constants (weights, bias) are kept by value: the cast pass may drop the originals.
    std::map<Node *, std::vector<Value *>> kept_inputs;
    std::map<std::pair<Node *, size_t>, at::Tensor> kept_constants;
    std::set<Value *> fp32_values;
    for (Node *node : keep_fp32) {
        kept_inputs[node] = std::vector<Value *>(node->inputs().begin(), node->inputs().end());
        for (size_t i = 0; i < node->inputs().size(); ++i)
            if (auto t = passes::constant_tensor(node->input(i))) kept_constants[{node, i}] = *t;
        fp32_values.insert(node->output());
    }
    // Every dequantize hands bf16 on.
    std::vector<Node *> edges;
    for (Node *node : passes::collect_nodes(graph->block())) {
        if (node->kind() != kDequantize || !node->output()->hasUses()) continue;
        torch::jit::WithInsertPoint guard(node->next());
        Value *bf16 = insert_to(*graph, node->output(), at::kBFloat16);
        node->output()->replaceAllUsesAfterNodeWith(bf16->node(), bf16);
        fp32_values.insert(node->output());
        edges.push_back(bf16->node());
    }
    const passes::PassResult cast = passes::cast_to_lowp(graph, at::kBFloat16, /*keep_dtype_outputs=*/false);
    result.kept_fp32 = cast.skipped;
    if (cast.count == 0) {  // nothing compute-bound outside int8: leave the graph as it was
        for (Node *to : edges) {
            to->output()->replaceAllUsesWith(to->input(0));
            to->destroy();
        }
        return result;
    }
    result.applied = true;
    result.compute_ops = cast.count - static_cast<int>(keep_fp32.size());
    // Kept ops back to fp32: their original inputs (cast to fp32 when they now carry bf16;
    // aten::to is free when the dtype already matches), their output handed on as bf16.
    for (auto &[node, inputs] : kept_inputs) {
        torch::jit::WithInsertPoint guard(node);
        for (size_t i = 0; i < inputs.size(); ++i) {
            if (auto c = kept_constants.find({node, i}); c != kept_constants.end())
                node->replaceInput(i, graph->insertConstant(c->second));
            else if (fp32_values.count(inputs[i]))
                node->replaceInput(i, inputs[i]);
            else if (inputs[i]->type()->kind() == c10::TypeKind::TensorType)
                node->replaceInput(i, insert_to(*graph, inputs[i], at::kFloat));
        }
        torch::jit::WithInsertPoint after(node->next());
        Value *bf16 = insert_to(*graph, node->output(), at::kBFloat16);
        node->output()->replaceAllUsesAfterNodeWith(bf16->node(), bf16);
    }
    drop_round_trips(*graph, fp32_values);
    torch::jit::EliminateDeadCode(graph);
    // dequantize + cast to bf16 -> one op.
    for (Node *node : passes::collect_nodes(graph->block())) {
        if (cast_dtype(node) != at::kBFloat16 || node->input(0)->node()->kind() != kDequantize) continue;
        Node *deq = node->input(0)->node();
        if (ipex_ops) {
            torch::jit::WithInsertPoint guard(node);
            Value *direct = graph->insert(c10::Symbol::fromQualString("ipex::dequantize_bf16"), {deq->input(0)});
            direct->setType(node->output()->type());
            node->output()->replaceAllUsesWith(direct);
            node->destroy();
            if (!deq->hasUses()) deq->destroy();
        }
        ++result.bf16_edges;
    }
    torch::jit::EliminateDeadCode(graph);
    return result;
}

}  // namespace ipex::quant
