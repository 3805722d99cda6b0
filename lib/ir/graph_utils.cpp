#include "ir/graph_utils.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>

namespace ipex::passes {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

// Instance name the inliner gives to a method called on `self` (not a submodule).
constexpr const char *kSelfInstance = "SELF";
// Prefix of module scopes in traced graphs ("__module.layer1.0.conv1").
constexpr const char *kTracedModulePrefix = "__module.";

void histogram_block(const Block *block, std::map<std::string, int> &counts) {
    for (const Node *node : block->nodes()) {
        if (node->kind() != c10::prim::Constant) ++counts[node->kind().toQualString()];
        for (const Block *sub : node->blocks()) histogram_block(sub, counts);
    }
}

void collect_block(Block *block, std::vector<Node *> &out) {
    for (Node *node : block->nodes()) {
        out.push_back(node);
        for (Block *sub : node->blocks()) collect_block(sub, out);
    }
}

std::string path_from_scope(const Node *node) {
    const std::string scope = node->scopeName();
    if (scope.empty()) return "";
    const size_t slash = scope.rfind('/');
    std::string last = slash == std::string::npos ? scope : scope.substr(slash + 1);
    const std::string prefix = kTracedModulePrefix;
    if (last.compare(0, prefix.size(), prefix) == 0) last = last.substr(prefix.size());
    return last;
}

}  // namespace

std::map<std::string, int> op_histogram(const torch::jit::Graph &graph) {
    std::map<std::string, int> counts;
    histogram_block(graph.block(), counts);
    return counts;
}

int count_op(const torch::jit::Graph &graph, const std::string &kind) {
    const auto counts = op_histogram(graph);
    const auto it = counts.find(kind);
    return it == counts.end() ? 0 : it->second;
}

std::string module_path(const Node *node) {
    std::string path;
    if (const auto stack = node->callstack()) {
        for (const auto &entry : (*stack)->vec()) {
            const auto &instance = std::get<torch::jit::kModuleInstanceInfo>(entry);
            if (!instance) continue;
            const std::string name = instance->instance_name();
            if (name.empty() || name == kSelfInstance) continue;
            if (!path.empty()) path += '.';
            path += name;
        }
    }
    if (!path.empty()) return path;
    return path_from_scope(node);
}

std::string node_label(const Node *node) {
    std::string path = module_path(node);
    return path.empty() ? std::string(node->kind().toQualString()) : path;
}

std::optional<at::Tensor> constant_tensor(const Value *value) {
    const auto ivalue = torch::jit::toIValue(value);
    if (!ivalue || !ivalue->isTensor()) return std::nullopt;
    return ivalue->toTensor();
}

std::optional<bool> constant_bool(const Value *value) {
    const auto ivalue = torch::jit::toIValue(value);
    if (!ivalue || !ivalue->isBool()) return std::nullopt;
    return ivalue->toBool();
}

std::optional<int64_t> constant_int(const Value *value) {
    const auto ivalue = torch::jit::toIValue(value);
    if (!ivalue || !ivalue->isInt()) return std::nullopt;
    return ivalue->toInt();
}

std::optional<double> constant_double(const Value *value) {
    const auto ivalue = torch::jit::toIValue(value);
    if (!ivalue) return std::nullopt;
    if (ivalue->isDouble()) return ivalue->toDouble();
    if (ivalue->isInt()) return static_cast<double>(ivalue->toInt());
    return std::nullopt;
}

std::optional<std::vector<int64_t>> constant_int_list(const Value *value) {
    const auto ivalue = torch::jit::toIValue(value);
    if (!ivalue || !ivalue->isIntList()) return std::nullopt;
    return ivalue->toIntVector();
}

bool is_constant_none(const Value *value) {
    return value->node()->kind() == c10::prim::Constant && value->type()->kind() == c10::TypeKind::NoneType;
}

std::optional<size_t> input_index(const Node *node, const char *name) {
    const auto *schema = node->maybeSchema();
    if (!schema) return std::nullopt;
    const auto index = schema->argumentIndexWithName(name);
    if (!index || *index < 0 || *index >= static_cast<int>(node->inputs().size())) return std::nullopt;
    return static_cast<size_t>(*index);
}

Value *input_named(const Node *node, const char *name) {
    const auto index = input_index(node, name);
    return index ? node->input(*index) : nullptr;
}

std::vector<Node *> collect_nodes(Block *block) {
    std::vector<Node *> out;
    collect_block(block, out);
    return out;
}

std::vector<Node *> collect_nodes_of_kind(Block *block, const std::vector<c10::Symbol> &kinds) {
    std::vector<Node *> out;
    for (Node *node : collect_nodes(block)) {
        for (const auto kind : kinds) {
            if (node->kind() == kind) {
                out.push_back(node);
                break;
            }
        }
    }
    return out;
}

bool is_shape_query(const Node *node) {
    static const std::vector<c10::Symbol> kinds = {
        c10::Symbol::fromQualString("aten::dim"),    c10::Symbol::fromQualString("aten::size"),
        c10::Symbol::fromQualString("aten::numel"),  c10::Symbol::fromQualString("aten::len"),
        c10::Symbol::fromQualString("prim::shape"),  c10::Symbol::fromQualString("prim::dtype"),
        c10::Symbol::fromQualString("prim::device"), c10::Symbol::fromQualString("prim::layout"),
        c10::Symbol::fromQualString("aten::is_floating_point"),
    };
    return std::find(kinds.begin(), kinds.end(), node->kind()) != kinds.end();
}

bool only_shape_queries_besides(const Value *value, const Node *user) {
    for (const auto &use : value->uses())
        if (use.user != user && !is_shape_query(use.user)) return false;
    return true;
}

bool is_graph_output(const Value *value) {
    const Node *ret = value->owningGraph()->return_node();
    for (const auto &use : value->uses()) {
        const Node *user = use.user;
        if (user == ret) return true;
        const auto kind = user->kind();
        if ((kind == c10::prim::TupleConstruct || kind == c10::prim::ListConstruct) && is_graph_output(user->output()))
            return true;
    }
    return false;
}

Value *insert_constant_at_top(torch::jit::Graph &graph, const c10::IValue &value, const Node *origin) {
    torch::jit::WithInsertPoint guard(graph.block()->param_node()->next());
    Value *constant = graph.insertConstant(value);
    if (origin) constant->node()->setSourceRange(origin->sourceRange());
    return constant;
}

void copy_origin(Node *created, Node *origin) {
    created->setSourceRange(origin->sourceRange());
    if (origin->callstack()) created->setCallStack(*origin->callstack());
    created->setScope(origin->scope());
}

c10::TypePtr rank_only_type(const c10::TypePtr &type) {
    const auto tensor = type->cast<c10::TensorType>();
    if (!tensor || !tensor->dim()) return c10::TensorType::get();
    return c10::TensorType::create(tensor->scalarType(), tensor->device(), *tensor->dim(), false);
}

std::optional<size_t> known_rank(const Value *value) {
    const auto type = value->type()->cast<c10::TensorType>();
    if (!type || !type->dim()) return std::nullopt;
    return *type->dim();
}

bool is_aten_conv(const Node *node) { return ir::is_aten_conv(node->kind()); }

std::optional<bool> conv_transposed(const Node *node) {
    const auto kind = node->kind();
    if (kind == c10::aten::_convolution || kind == c10::aten::convolution) {
        const Value *transposed = input_named(node, "transposed");
        return transposed ? constant_bool(transposed) : std::nullopt;
    }
    if (kind == c10::aten::conv_transpose1d || kind == c10::aten::conv_transpose2d ||
        kind == c10::aten::conv_transpose3d)
        return true;
    if (kind == c10::aten::conv1d || kind == c10::aten::conv2d || kind == c10::aten::conv3d) return false;
    return std::nullopt;
}

}  // namespace ipex::passes
