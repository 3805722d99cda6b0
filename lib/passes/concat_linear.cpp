#include "passes/concat_linear.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/alias_analysis.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

constexpr int64_t kLastDim = -1;
constexpr size_t kLinearWeightRank = 2;

struct Candidate {
    Node *node;
    at::Tensor weight;
    at::Tensor bias;  // undefined when the linear has none
    bool needs_contiguous = false;
};

struct Merge {
    Value *input;
    std::vector<Candidate> members;  // in program order
};

bool same_kind(const Candidate &a, const Candidate &b) {
    // A linear without bias joins one with bias through a zero bias of the weight's dtype.
    const at::ScalarType bias_a = a.bias.defined() ? a.bias.scalar_type() : a.weight.scalar_type();
    const at::ScalarType bias_b = b.bias.defined() ? b.bias.scalar_type() : b.weight.scalar_type();
    return a.weight.scalar_type() == b.weight.scalar_type() && a.weight.device() == b.weight.device() &&
           a.weight.size(1) == b.weight.size(1) && bias_a == bias_b;
}

std::optional<Candidate> read_candidate(Node *linear, std::string *why_not) {
    const auto weight = constant_tensor(input_named(linear, "weight"));
    if (!weight || weight->dim() != kLinearWeightRank || !weight->is_floating_point()) {
        *why_not = "weight is not a constant floating 2-D tensor";
        return std::nullopt;
    }
    Candidate c{linear, *weight, at::Tensor()};
    Value *bias_value = input_named(linear, "bias");
    if (const auto bias = constant_tensor(bias_value)) {
        if (bias->dim() != 1 || bias->numel() != weight->size(0)) {
            *why_not = "bias does not match the weight";
            return std::nullopt;
        }
        c.bias = *bias;
    } else if (!is_constant_none(bias_value)) {
        *why_not = "bias is not a constant";
        return std::nullopt;
    }
    return c;
}

// Ops that need a viewable layout, or whose result depends on the strides of their input.
bool needs_view_layout(const Node *user) {
    const std::string kind = user->kind().toQualString();
    return kind == "aten::view" || kind == "aten::view_as" || kind == "aten::unflatten" ||
           kind == "aten::as_strided" || kind == "aten::_reshape_alias" || kind == "aten::stride" ||
           kind == "aten::is_contiguous" || kind == "prim::is_contiguous";
}

// True when a slice of the merged output could behave differently from the fresh contiguous
// tensor the linear produced: it (or a view of it) reaches an op that needs a viewable
// layout, or leaves the ops we can see (returned, stored in a container, passed to a block).
bool reaches_layout_sensitive_use(const Value *value, std::unordered_set<const Value *> &seen) {
    if (!seen.insert(value).second) return false;
    for (const auto &use : value->uses()) {
        const Node *user = use.user;
        if (needs_view_layout(user)) return true;
        if (user->kind() == c10::prim::ListUnpack) {
            for (const Value *out : user->outputs())
                if (reaches_layout_sensitive_use(out, seen)) return true;
            continue;
        }
        const auto *schema = user->maybeSchema();
        if (!schema) return true;  // return, control flow, containers
        if (use.offset >= schema->arguments().size()) return true;
        if (!schema->arguments()[use.offset].alias_info()) continue;  // fresh result
        for (const Value *out : user->outputs())
            if (reaches_layout_sensitive_use(out, seen)) return true;
    }
    return false;
}

std::string common_module_prefix(const std::vector<Candidate> &members) {
    std::string prefix = module_path(members.front().node);
    for (const auto &m : members) {
        const std::string path = module_path(m.node);
        size_t n = 0;
        while (n < prefix.size() && n < path.size() && prefix[n] == path[n]) ++n;
        prefix = prefix.substr(0, n);
    }
    const size_t dot = prefix.rfind('.');
    if (dot != std::string::npos && dot + 1 < prefix.size()) prefix = prefix.substr(0, dot);
    while (!prefix.empty() && prefix.back() == '.') prefix.pop_back();
    return prefix.empty() ? "linear" : prefix;
}

void plan_block(Block *block, torch::jit::AliasDb &alias_db, std::vector<Merge> &merges, PassResult &result) {
    std::vector<std::pair<Value *, std::vector<Node *>>> by_input;
    for (Node *node : block->nodes()) {
        for (Block *sub : node->blocks()) plan_block(sub, alias_db, merges, result);
        if (node->kind() != c10::aten::linear) continue;
        Value *input = node->input(0);
        auto it = std::find_if(by_input.begin(), by_input.end(), [&](const auto &e) { return e.first == input; });
        if (it == by_input.end()) {
            by_input.push_back({input, {node}});
        } else {
            it->second.push_back(node);
        }
    }
    for (auto &[input, linears] : by_input) {
        if (linears.size() < 2) continue;
        if (alias_db.hasWriters(input)) {
            for (Node *linear : linears)
                result.skipped.push_back(node_label(linear) + ": shares its input with other linears, but the input is modified in place");
            continue;
        }
        std::vector<std::vector<Candidate>> groups;
        for (Node *linear : linears) {
            std::string why_not;
            auto candidate = read_candidate(linear, &why_not);
            if (!candidate) {
                result.skipped.push_back(node_label(linear) + ": shares its input with other linears, but its " + why_not);
                continue;
            }
            auto group = std::find_if(groups.begin(), groups.end(),
                                      [&](const auto &g) { return same_kind(g.front(), *candidate); });
            if (group == groups.end()) {
                groups.push_back({*candidate});
            } else {
                group->push_back(*candidate);
            }
        }
        for (auto &group : groups) {
            if (group.size() < 2) {
                result.skipped.push_back(node_label(group.front().node) +
                                         ": shares its input with other linears, but differs in dtype or in-features");
                continue;
            }
            for (auto &member : group) {
                std::unordered_set<const Value *> seen;
                Value *out = member.node->output();
                member.needs_contiguous = alias_db.hasWriters(out) || reaches_layout_sensitive_use(out, seen);
            }
            merges.push_back({input, group});
        }
    }
}

void apply_merge(torch::jit::Graph &graph, const Merge &merge) {
    const auto &members = merge.members;
    Node *first = members.front().node;
    std::vector<at::Tensor> weights;
    std::vector<at::Tensor> biases;
    std::vector<int64_t> sizes;
    bool any_bias = false;
    for (const auto &m : members) any_bias |= m.bias.defined();
    for (const auto &m : members) {
        weights.push_back(m.weight);
        sizes.push_back(m.weight.size(0));
        if (m.bias.defined()) biases.push_back(m.bias);
        else if (any_bias) biases.push_back(at::zeros({m.weight.size(0)}, m.weight.options()));
    }
    const std::string prefix = common_module_prefix(members);
    Value *weight = insert_constant_at_top(graph, at::cat(weights, 0), first);
    weight->setDebugName(prefix + ".concat_linear_weight");
    Value *bias = nullptr;
    if (!biases.empty()) {
        bias = insert_constant_at_top(graph, at::cat(biases, 0), first);
        bias->setDebugName(prefix + ".concat_linear_bias");
    } else {
        bias = insert_constant_at_top(graph, c10::IValue(), first);
    }

    torch::jit::WithInsertPoint at_first(first);
    Node *merged = graph.insertNode(graph.create(c10::aten::linear, {merge.input, weight, bias}));
    merged->copyMetadata(first);
    merged->output()->setType(rank_only_type(first->output()->type()));
    Value *split_sizes = graph.insertConstant(c10::IValue(sizes));
    Value *dim = graph.insertConstant(kLastDim);
    Node *split = graph.insertNode(graph.create(c10::aten::split_with_sizes, {merged->output(), split_sizes, dim}));
    split->copyMetadata(first);
    split->output()->setType(c10::ListType::ofTensors());
    Node *unpack = graph.insertNode(graph.createListUnpack(split->output(), members.size()));
    for (size_t i = 0; i < members.size(); ++i) {
        Node *linear = members[i].node;
        Value *slice = unpack->output(i);
        slice->setType(rank_only_type(linear->output()->type()));
        if (members[i].needs_contiguous) {
            Value *format = graph.insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous));
            Node *contiguous = graph.insertNode(graph.create(c10::aten::contiguous, {slice, format}));
            contiguous->copyMetadata(linear);
            contiguous->output()->setType(linear->output()->type());
            slice = contiguous->output();
        }
        linear->output()->replaceAllUsesWith(slice);
    }
    for (const auto &m : members) m.node->destroy();
}

}  // namespace

PassResult concat_linear(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    std::vector<Merge> merges;
    {
        torch::jit::AliasDb alias_db(graph, /*isFrozen=*/true);
        plan_block(graph->block(), alias_db, merges, result);
    }
    for (const auto &merge : merges) {
        for (const auto &m : merge.members) {
            result.modules.push_back(node_label(m.node));
            ++result.count;
        }
        apply_merge(*graph, merge);
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
