#include "passes/merge_embedding_bags.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kMerged = c10::Symbol::fromQualString("ipex::merged_embedding_bag");

// One call the merged op can take, with its arguments read.
struct Call {
    Node *node = nullptr;
    at::Tensor table;
    int64_t mode = 0;
    bool include_last_offset = false;
    int64_t padding_idx = -1;  // normalized: a row, or -1
    std::string index_dtype;   // "Long", "Int", or "" when the graph does not say
};

// What calls must share to be merged.
using GroupKey = std::tuple<torch::jit::Block *, int64_t, bool, std::string, at::ScalarType>;

// The call's arguments, or nullopt with the reason it stays.
std::optional<Call> read_call(Node *node, std::string *why) {
    Call call;
    call.node = node;
    const auto table = constant_tensor(node->input(0));
    if (!table || table->dim() != 2 || (table->scalar_type() != at::kFloat && table->scalar_type() != at::kBFloat16)) {
        *why = "the table is not a constant fp32 or bf16 matrix";
        return std::nullopt;
    }
    call.table = *table;
    const auto mode = constant_int(node->input(4));
    if (!mode || (*mode != 0 && *mode != 1)) {
        *why = "max pooling (or a mode that is not constant) is not merged";
        return std::nullopt;
    }
    call.mode = *mode;
    const auto last = constant_bool(node->input(7));
    if (!last) {
        *why = "include_last_offset is not constant";
        return std::nullopt;
    }
    call.include_last_offset = *last;
    if (!is_constant_none(node->input(6)) && call.mode != 0) {
        *why = "per_sample_weights with mean pooling";
        return std::nullopt;
    }
    if (node->inputs().size() > 8 && !is_constant_none(node->input(8))) {
        const auto padding = constant_int(node->input(8));
        const int64_t rows = call.table.size(0);
        if (!padding || *padding < -rows || *padding >= rows) {
            *why = "padding_idx is not constant or not a row of the table";
            return std::nullopt;
        }
        call.padding_idx = *padding < 0 ? *padding + rows : *padding;
    }
    for (size_t i = 1; i < node->outputs().size(); ++i) {
        if (node->output(i)->hasUses()) {
            *why = "its offset2bag, bag_size or max_indices output is read";
            return std::nullopt;
        }
    }
    if (const auto type = node->input(1)->type()->cast<c10::TensorType>())
        if (type->scalarType()) call.index_dtype = c10::toString(*type->scalarType());
    return call;
}

// Whether every read of a call's output comes after `last`.
bool read_after(const std::vector<Call> &group, Node *last) {
    for (const Call &call : group)
        for (const auto &use : call.node->output(0)->uses())
            if (!use.user->isAfter(last)) return false;
    return true;
}

Value *list_of(torch::jit::Graph &graph, const c10::TypePtr &element, const std::vector<Value *> &values) {
    return graph.insertNode(graph.createList(element, values))->output();
}

// Replaces the group's calls by one merged op after the last of them.
void merge(torch::jit::Graph &graph, const std::vector<Call> &group, bool bf16_tables) {
    Node *last = group.back().node;
    torch::jit::WithInsertPoint guard(last->next());
    std::vector<Value *> tables, indices, offsets, weights;
    std::vector<int64_t> padding;
    const bool convert = bf16_tables && group.front().table.scalar_type() == at::kFloat;
    std::map<Value *, Value *> converted;  // a table two calls read is converted once
    for (const Call &call : group) {
        Value *table = call.node->input(0);
        if (convert) {
            Value *&bf16 = converted[table];
            if (!bf16) {
                bf16 = graph.insertConstant(call.table.to(at::kBFloat16));
                if (table->hasDebugName()) bf16->setDebugName(table->debugName() + "_bf16");
            }
            table = bf16;
        }
        tables.push_back(table);
        indices.push_back(call.node->input(1));
        offsets.push_back(call.node->input(2));
        weights.push_back(call.node->input(6));
        padding.push_back(call.padding_idx);
    }
    const auto tensor = c10::TensorType::get();
    Value *dtype =
        convert ? graph.insertConstant(static_cast<int64_t>(at::kFloat)) : graph.insertConstant(c10::IValue());
    Node *merged = graph.create(
        kMerged,
        {list_of(graph, tensor, tables), list_of(graph, tensor, indices), list_of(graph, tensor, offsets),
         list_of(graph, c10::OptionalType::create(tensor), weights), graph.insertConstant(padding),
         graph.insertConstant(group.front().mode), graph.insertConstant(group.front().include_last_offset), dtype},
        1);
    graph.insertNode(merged);
    merged->output()->setType(c10::ListType::ofTensors());
    copy_origin(merged, group.front().node);
    Node *unpack = graph.insertNode(graph.createListUnpack(merged->output(), group.size()));
    for (size_t t = 0; t < group.size(); ++t) {
        unpack->output(t)->setType(group[t].node->output(0)->type());
        group[t].node->output(0)->replaceAllUsesWith(unpack->output(t));
    }
    for (const Call &call : group) call.node->destroy();
}

}  // namespace

PassResult merge_embedding_bags(std::shared_ptr<torch::jit::Graph> &graph, bool bf16_tables) {
    PassResult result;
    // Candidates by what they must share, in program order.
    std::map<GroupKey, std::vector<Call>> candidates;
    std::vector<GroupKey> order;
    for (Node *node : collect_nodes_of_kind(graph->block(), {c10::aten::embedding_bag})) {
        std::string why;
        const auto call = read_call(node, &why);
        if (!call) {
            result.skipped.push_back(node_label(node) + ": " + why);
            continue;
        }
        const GroupKey key{node->owningBlock(), call->mode, call->include_last_offset, call->index_dtype,
                           call->table.scalar_type()};
        if (!candidates.count(key)) order.push_back(key);
        candidates[key].push_back(*call);
    }
    // Each group's calls are brought together: each moves (with what it reads) to just after the
    // one before, where alias analysis allows it; a call that cannot move starts a new group.
    std::vector<std::vector<Call>> groups;
    {
        torch::jit::AliasDb alias_db(graph);
        for (const GroupKey &key : order) {
            std::vector<Call> group;
            for (const Call &call : candidates[key]) {
                if (!group.empty() && !alias_db.moveAfterTopologicallyValid(call.node, group.back().node)) {
                    result.skipped.push_back(node_label(call.node) +
                                             ": cannot be moved beside the calls before it; starts a new group");
                    groups.push_back(std::move(group));
                    group.clear();
                }
                group.push_back(call);
            }
            groups.push_back(std::move(group));
        }
    }
    for (const std::vector<Call> &group : groups) {
        if (group.size() < 2) {
            if (!group.empty())
                result.skipped.push_back(node_label(group.front().node) + ": no other table to merge with");
            continue;
        }
        if (!read_after(group, group.back().node)) {
            result.skipped.push_back(node_label(group.front().node) +
                                     ": an output is read before the last call of its group");
            continue;
        }
        for (const Call &call : group) result.modules.push_back(node_label(call.node));
        merge(*graph, group, bf16_tables);
        ++result.count;
    }
    result.changed = result.count > 0;
    result.details = {{"tables", result.modules.size()}};
    return result;
}

}  // namespace ipex::passes
