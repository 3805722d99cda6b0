#include "passes/replace_matmul.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kMatmul = c10::Symbol::fromQualString("aten::matmul");
const c10::Symbol kMm = c10::Symbol::fromQualString("aten::mm");
const c10::Symbol kBmm = c10::Symbol::fromQualString("aten::bmm");
const c10::Symbol kAddmm = c10::Symbol::fromQualString("aten::addmm");
const c10::Symbol kBaddbmm = c10::Symbol::fromQualString("aten::baddbmm");
const c10::Symbol kEinsum = c10::Symbol::fromQualString("aten::einsum");
const c10::Symbol kIpexMatmul = c10::Symbol::fromQualString("ipex::matmul");
const c10::Symbol kLinear = c10::Symbol::fromQualString("aten::linear");
const c10::Symbol kPermute = c10::Symbol::fromQualString("aten::permute");
const c10::Symbol kMul = c10::Symbol::fromQualString("aten::mul");
const c10::Symbol kAdd = c10::Symbol::fromQualString("aten::add");
const c10::Symbol kT = c10::Symbol::fromQualString("aten::t");
const c10::Symbol kTo = c10::Symbol::fromQualString("aten::to");

std::optional<double> constant_number(const Value *value) {
    if (const auto d = constant_double(value)) return d;
    if (const auto i = constant_int(value)) return static_cast<double>(*i);
    return std::nullopt;
}

// A constant 2-D floating tensor (a weight), or nullopt.
std::optional<at::Tensor> constant_matrix(const Value *value) {
    const auto t = constant_tensor(value);
    if (!t || t->dim() != 2 || !t->is_floating_point() || t->numel() == 0) return std::nullopt;
    return t;
}

Value *insert_op(torch::jit::Graph &graph, c10::Symbol kind, std::vector<Value *> inputs, Node *origin) {
    Node *node = graph.create(kind, inputs, 1);
    copy_origin(node, origin);
    graph.insertNode(node);
    return node->output();
}

Value *ipex_matmul(torch::jit::Graph &graph, Value *a, Value *b, Node *origin) {
    Value *out = insert_op(graph, kIpexMatmul, {a, b}, origin);
    out->setType(c10::TensorType::get());
    return out;
}

Value *permuted(torch::jit::Graph &graph, Value *x, const std::vector<int64_t> &order, Node *origin) {
    std::vector<int64_t> identity(order.size());
    std::iota(identity.begin(), identity.end(), 0);
    if (order == identity) return x;
    Value *out = insert_op(graph, kPermute, {x, graph.insertConstant(order)}, origin);
    out->setType(c10::TensorType::get());
    return out;
}

// x @ w (w a constant [K, N]) as linear(x, wᵀ, bias).
Value *as_linear(torch::jit::Graph &graph, Value *x, const at::Tensor &w, Value *bias, Node *origin) {
    Value *weight = insert_constant_at_top(graph, w.t().contiguous(), origin);
    Value *out = insert_op(graph, kLinear, {x, weight, bias}, origin);
    out->setType(rank_only_type(origin->output()->type()));
    return out;
}

// A two-operand einsum that is a batched matmul: the permutes of both operands to
// [batch..., M, K] / [batch..., K, N] and of the result [batch..., M, N] to the output order.
struct EinsumPlan {
    std::vector<int64_t> perm_a, perm_b, perm_out;
};

std::optional<EinsumPlan> plan_einsum(std::string equation, std::string &why) {
    equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
    const size_t arrow = equation.find("->");
    const size_t comma = equation.find(',');
    if (arrow == std::string::npos || comma == std::string::npos || comma > arrow ||
        equation.find(',', comma + 1) != std::string::npos || equation.find('.') != std::string::npos) {
        why = "not a two-operand equation with an explicit output";
        return std::nullopt;
    }
    const std::string a = equation.substr(0, comma), b = equation.substr(comma + 1, arrow - comma - 1),
                      out = equation.substr(arrow + 2);
    auto distinct = [](const std::string &s) { return std::set<char>(s.begin(), s.end()).size() == s.size(); };
    if (!distinct(a) || !distinct(b) || !distinct(out)) {
        why = "an index repeats within one operand (a diagonal)";
        return std::nullopt;
    }
    auto has = [](const std::string &s, char c) { return s.find(c) != std::string::npos; };
    std::string batch, m, n, k;
    for (char c : out) {
        if (has(a, c) && has(b, c)) batch += c;
        else if (has(a, c)) m += c;
        else if (has(b, c)) n += c;
        else {
            why = "an output index is in neither operand";
            return std::nullopt;
        }
    }
    for (char c : a)
        if (!has(out, c)) {
            if (!has(b, c)) {
                why = "an index of one operand alone is summed";
                return std::nullopt;
            }
            k += c;
        }
    for (char c : b)
        if (!has(out, c) && !has(a, c)) {
            why = "an index of one operand alone is summed";
            return std::nullopt;
        }
    if (m.size() != 1 || n.size() != 1 || k.size() != 1) {
        why = "not one row, one column and one contracted index";
        return std::nullopt;
    }
    EinsumPlan plan;
    for (char c : batch) {
        plan.perm_a.push_back(static_cast<int64_t>(a.find(c)));
        plan.perm_b.push_back(static_cast<int64_t>(b.find(c)));
    }
    plan.perm_a.push_back(static_cast<int64_t>(a.find(m[0])));
    plan.perm_a.push_back(static_cast<int64_t>(a.find(k[0])));
    plan.perm_b.push_back(static_cast<int64_t>(b.find(k[0])));
    plan.perm_b.push_back(static_cast<int64_t>(b.find(n[0])));
    const std::string product = batch + m + n;
    for (char c : out) plan.perm_out.push_back(static_cast<int64_t>(product.find(c)));
    return plan;
}

// einsum(str equation, Tensor[] tensors, *, int[]? path=None) that is a batched matmul, as
// permutes around a `product` node (aten::matmul or ipex::matmul) inserted before it; nullptr
// (with `why`) for other equations.
Value *einsum_as_product(torch::jit::Graph &graph, Node *node, c10::Symbol product, std::string &why) {
    torch::jit::WithInsertPoint guard(node);
    const c10::IValue equation = torch::jit::toIValue(node->input(0)).value_or(c10::IValue());
    Node *list = node->input(1)->node();
    if (!equation.isString() || list->kind() != c10::prim::ListConstruct || list->inputs().size() != 2) {
        why = "the equation is not a constant or the operands are not two listed tensors";
        return nullptr;
    }
    const auto plan = plan_einsum(equation.toStringRef(), why);
    if (!plan) return nullptr;
    Value *a = permuted(graph, list->input(0), plan->perm_a, node);
    Value *b = permuted(graph, list->input(1), plan->perm_b, node);
    Value *y = insert_op(graph, product, {a, b}, node);
    y->setType(c10::TensorType::get());
    return permuted(graph, y, plan->perm_out, node);
}

// The replacement of `node`'s output, inserted before it; nullptr (with `why`) when kept.
Value *rewrite(torch::jit::Graph &graph, Node *node, std::string &why) {
    torch::jit::WithInsertPoint guard(node);
    const c10::Symbol kind = node->kind();
    if (kind == kMatmul || kind == kMm || kind == kBmm) {
        if (node->inputs().size() != 2) {
            why = "unexpected signature";
            return nullptr;
        }
        if (kind != kBmm && !constant_tensor(node->input(0)))
            if (const auto w = constant_matrix(node->input(1)))
                return as_linear(graph, node->input(0), *w, graph.insertConstant(c10::IValue()), node);
        return ipex_matmul(graph, node->input(0), node->input(1), node);
    }
    if (kind == kAddmm) {
        const auto w = constant_matrix(input_named(node, "mat2"));
        const auto bias = constant_tensor(input_named(node, "self"));
        if (!w || !bias || constant_number(input_named(node, "beta")) != 1.0 ||
            constant_number(input_named(node, "alpha")) != 1.0 || bias->numel() != w->size(1) ||
            bias->size(-1) != w->size(1)) {
            why = "addmm without a constant weight, a constant row bias and beta = alpha = 1";
            return nullptr;
        }
        Value *b = insert_constant_at_top(graph, bias->flatten().contiguous(), node);
        return as_linear(graph, input_named(node, "mat1"), *w, b, node);
    }
    if (kind == kBaddbmm) {
        const auto beta = constant_number(input_named(node, "beta"));
        const auto alpha = constant_number(input_named(node, "alpha"));
        if (!beta || !alpha) {
            why = "beta or alpha is not a constant";
            return nullptr;
        }
        Value *y = ipex_matmul(graph, input_named(node, "batch1"), input_named(node, "batch2"), node);
        if (*alpha != 1.0) {
            y = insert_op(graph, kMul, {y, graph.insertConstant(*alpha)}, node);
            y->setType(c10::TensorType::get());
        }
        if (*beta != 0.0) {
            y = insert_op(graph, kAdd, {y, input_named(node, "self"), graph.insertConstant(*beta)}, node);
            y->setType(c10::TensorType::get());
        }
        return y;
    }
    return einsum_as_product(graph, node, kIpexMatmul, why);
}

}  // namespace

PassResult replace_matmul(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    int linears = 0;
    for (Node *node : collect_nodes_of_kind(graph->block(), {kMatmul, kMm, kBmm, kAddmm, kBaddbmm, kEinsum})) {
        const std::string label = node_label(node);
        std::string why;
        Value *replacement = rewrite(*graph, node, why);
        if (!replacement) {
            result.skipped.push_back(label + ": kept as " + node->kind().toQualString() + " (" + why + ")");
            continue;
        }
        const bool linear = replacement->node()->kind() == kLinear;
        linears += linear;
        node->output()->replaceAllUsesWith(replacement);
        node->destroy();
        result.modules.push_back(label + (linear ? " (aten::linear)" : " (ipex::matmul)"));
        ++result.count;
    }
    result.details = {{"to_linear", linears}, {"to_ipex_matmul", result.count - linears}};
    result.changed = result.count > 0;
    return result;
}

PassResult einsum_to_matmul(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    for (Node *node : collect_nodes_of_kind(graph->block(), {kEinsum})) {
        std::string why;
        Value *replacement = einsum_as_product(*graph, node, kMatmul, why);
        if (!replacement) continue;  // replace_matmul reports it
        node->output()->replaceAllUsesWith(replacement);
        result.modules.push_back(node_label(node));
        Node *list = node->input(1)->node();
        node->destroy();
        if (!list->hasUses()) list->destroy();  // its operands' only uses may matter to later passes
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

PassResult remaining_linears_to_matmul(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    for (Node *node : collect_nodes_of_kind(graph->block(), {kLinear})) {
        if (node->inputs().size() != 3) continue;
        // A constant weight (or a cast of one) was left by weights_prepack on purpose (no
        // oneDNN kernel for the dtype on this CPU, say): it stays aten::linear.
        const Value *weight = node->input(1);
        while (weight->node()->kind() == kTo) weight = weight->node()->input(0);
        if (constant_tensor(weight)) continue;
        torch::jit::WithInsertPoint guard(node);
        Value *wt = insert_op(*graph, kT, {node->input(1)}, node);
        wt->setType(c10::TensorType::get());
        Value *y = ipex_matmul(*graph, node->input(0), wt, node);
        if (!is_constant_none(node->input(2))) {
            y = insert_op(*graph, kAdd, {y, node->input(2), graph->insertConstant(1)}, node);
            y->setType(c10::TensorType::get());
        }
        node->output()->replaceAllUsesWith(y);
        result.modules.push_back(node_label(node) + " (ipex::matmul)");
        node->destroy();
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
