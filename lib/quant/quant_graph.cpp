#include "quant/quant_graph.h"

#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "passes/decompose_transformer_layer.h"
#include "ir/graph_utils.h"
#include "passes/pipeline.h"

namespace ipex::quant {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// The single non-shape-query user of `value`, or nullptr.
Node *sole_user(Value *value) {
    if (passes::is_graph_output(value)) return nullptr;
    Node *user = nullptr;
    for (const auto &use : value->uses()) {
        if (use.user->owningBlock() != value->node()->owningBlock()) return nullptr;
        if (passes::is_shape_query(use.user)) return nullptr;  // keep shape users on fp32
        if (user) return nullptr;
        user = use.user;
    }
    return user;
}

bool is_relu(const Node *node) { return node && node->kind() == c10::Symbol::aten("relu"); }

// aten::add(Tensor, Tensor, alpha=1) adding two values computed by the graph.
bool is_plain_add(const Node *node) {
    if (!node || node->kind() != c10::Symbol::aten("add") || node->inputs().size() != 3) return false;
    const auto alpha = passes::constant_double(node->input(2));
    if (!alpha || *alpha != 1.0) return false;
    for (size_t i = 0; i < 2; ++i) {
        if (!node->input(i)->type()->cast<c10::TensorType>()) return false;
        if (node->input(i)->node()->kind() == c10::prim::Constant) return false;
    }
    return true;
}

void match_fusion(QuantOp &op) {
    Value *out = op.node->output();
    if (Node *u = sole_user(out); is_relu(u)) {
        op.relu = u;
        out = u->output();
    }
    Node *u = sole_user(out);
    if (!is_plain_add(u) || u->input(0) == u->input(1)) return;
    op.add = u;
    op.add_other = u->input(0) == out ? u->input(1) : u->input(0);
    if (Node *r = sole_user(u->output()); is_relu(r)) op.add_relu = r;
}

std::optional<QuantOp> conv_op(Node *node, bool traced) {
    QuantOp op;
    op.node = node;
    op.input = node->input(0);
    const auto weight = passes::constant_tensor(node->input(1));
    if (!weight || weight->dim() < 3 || weight->dim() > 5 || !weight->is_floating_point()) return std::nullopt;
    op.weight = *weight;
    if (!passes::is_constant_none(node->input(2))) {
        const auto bias = passes::constant_tensor(node->input(2));
        if (!bias) return std::nullopt;
        op.bias = *bias;
    }
    const auto stride = passes::constant_int_list(node->input(3));
    const auto padding = passes::constant_int_list(node->input(4));
    const auto dilation = passes::constant_int_list(node->input(5));
    if (!stride || !padding || !dilation) return std::nullopt;  // e.g. padding="same"
    std::optional<int64_t> groups;
    if (traced) {
        const auto transposed = passes::constant_bool(node->input(6));
        if (!transposed || *transposed) return std::nullopt;
        groups = passes::constant_int(node->input(8));
    } else {
        groups = passes::constant_int(node->input(6));
    }
    if (!groups) return std::nullopt;
    const size_t spatial = static_cast<size_t>(weight->dim() - 2);
    if (stride->size() != spatial || padding->size() != spatial || dilation->size() != spatial)
        return std::nullopt;
    op.stride = *stride;
    op.padding = *padding;
    op.dilation = *dilation;
    op.groups = *groups;
    op.kind = "conv" + std::to_string(spatial) + "d";
    return op;
}

std::optional<QuantOp> linear_op(Node *node) {
    QuantOp op;
    op.node = node;
    op.input = node->input(0);
    const auto weight = passes::constant_tensor(node->input(1));
    if (!weight || weight->dim() != 2 || !weight->is_floating_point()) return std::nullopt;
    if (node->kind() == c10::Symbol::aten("matmul")) {
        op.kind = "matmul";
        op.weight = weight->t().contiguous();
        return op;
    }
    op.kind = "linear";
    op.weight = *weight;
    if (!passes::is_constant_none(node->input(2))) {
        const auto bias = passes::constant_tensor(node->input(2));
        if (!bias) return std::nullopt;
        op.bias = *bias;
    }
    return op;
}

uint64_t fnv1a(uint64_t h, const std::string &text) {
    for (unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

// The conv or linear `node` is, when it is a quantizable one.
std::optional<QuantOp> quantizable_op(Node *node) {
    const std::string kind = node->kind().toQualString();
    if (kind == "aten::conv1d" || kind == "aten::conv2d" || kind == "aten::conv3d") return conv_op(node, false);
    if (kind == "aten::_convolution" && node->inputs().size() >= 9) return conv_op(node, true);
    if (kind == "aten::linear" || kind == "aten::matmul") return linear_op(node);
    return std::nullopt;
}

}  // namespace

Value *QuantOp::output() const { return relu ? relu->output() : node->output(); }

Value *QuantOp::chain_output() const {
    if (add_relu) return add_relu->output();
    if (add) return add->output();
    return output();
}

std::vector<QuantOp> find_quant_ops(const std::shared_ptr<torch::jit::Graph> &graph) {
    std::vector<QuantOp> ops;
    std::map<std::string, int> occurrences;
    // Top-level ops only: values inside if/loop blocks cannot be observed from outside, and
    // ops there stay fp32.
    for (Node *node : graph->block()->nodes()) {
        if (node->outputs().size() != 1) continue;
        std::optional<QuantOp> op = quantizable_op(node);
        if (!op) continue;
        op->module = passes::module_path(node);
        const std::string key = op->module + ":" + op->kind;
        op->id = key + ":" + std::to_string(occurrences[key]++);
        match_fusion(*op);
        ops.push_back(std::move(*op));
    }
    // An add of two op outputs (a residual block's main branch and its downsample) fuses
    // into the first of them only; the second is its other operand.
    std::set<Node *> claimed;
    for (auto &op : ops) {
        if (op.add && !claimed.insert(op.add).second) {
            op.add = nullptr;
            op.add_other = nullptr;
            op.add_relu = nullptr;
        }
    }
    return ops;
}

std::vector<std::string> nested_quant_ops(const std::shared_ptr<torch::jit::Graph> &graph) {
    // One entry per module and op kind ("enc.0.self_attn: linear") and kind of block around
    // it, in graph order, with how many such ops there are.
    using Place = std::pair<std::string, std::string>;
    std::vector<Place> places;
    std::map<Place, int> counts;
    for (Node *node : passes::collect_nodes(graph->block())) {
        if (node->owningBlock() == graph->block() || node->outputs().size() != 1) continue;
        std::optional<QuantOp> op = quantizable_op(node);
        if (!op) continue;
        // The outermost control-flow node around it.
        Node *outer = node->owningBlock()->owningNode();
        while (outer && outer->owningBlock() != graph->block()) outer = outer->owningBlock()->owningNode();
        const std::string block = outer ? outer->kind().toQualString() : "sub-block";
        const std::string module = passes::module_path(node);
        const Place place{(module.empty() ? std::string("(top level)") : module) + ": " + op->kind,
                          block + (block == "prim::Loop" ? " body" : " block")};
        if (counts[place]++ == 0) places.push_back(place);
    }
    std::vector<std::string> found;
    for (const auto &place : places) {
        const int n = counts[place];
        found.push_back(place.first + (n == 1 ? "" : " (" + std::to_string(n) + " ops)") + " inside a " + place.second +
                        (n == 1 ? " stays" : " stay") +
                        " fp32 (only ops at the top level of the graph are calibrated and quantized)");
    }
    return found;
}

std::string model_identity(const std::shared_ptr<torch::jit::Graph> &graph,
                           const std::vector<QuantOp> &ops) {
    uint64_t h = 14695981039346656037ull;
    for (const auto &[kind, count] : passes::op_histogram(*graph))
        h = fnv1a(h, kind + "=" + std::to_string(count) + ";");
    for (const auto &op : ops) {
        std::string shape;
        for (int64_t s : op.weight.sizes()) shape += std::to_string(s) + "x";
        h = fnv1a(h, op.id + "/" + shape + ";");
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

PreparedModel prepare_for_quantization(const torch::jit::Module &input) {
    passes::OptimizeOptions options;
    options.dtype = "fp32";
    options.level = "O1";
    options.knob_overrides["concat-linear"] = false;
    options.knob_overrides["channels-last"] = false;
    options.replace_pooling = false;  // int8 values pass through aten's pooling ops as they are
    // Scripted transformer modules keep their linears in the branch that their run-time
    // fast-path check skips; taking that choice out brings the linears to the top level.
    options.decompose_transformer_layers = true;
    passes::OptimizeResult optimized = passes::optimize_module(input, options);
    PreparedModel prepared;
    prepared.module = optimized.module;
    prepared.report = optimized.report;
    prepared.passes = optimized.passes;
    prepared.graph = prepared.module.get_method("forward").graph();
    torch::jit::RemoveTensorMutation(prepared.graph);
    torch::jit::EliminateDeadCode(prepared.graph);
    prepared.ops = find_quant_ops(prepared.graph);
    prepared.nested_fp32 = nested_quant_ops(prepared.graph);
    prepared.identity = model_identity(prepared.graph, prepared.ops);
    return prepared;
}

}  // namespace ipex::quant
