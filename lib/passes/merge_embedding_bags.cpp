#include "passes/merge_embedding_bags.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ir/graph_utils.h"
#include "ops/recsys/recsys_ops.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kMerged = c10::Symbol::fromQualString("ipex::merged_embedding_bag");
const c10::Symbol kByteBag = c10::Symbol::fromQualString("quantized::embedding_bag_byte_rowwise_offsets");

// One call the merged op can take, with its arguments read.
struct Call {
    Node *node = nullptr;
    at::Tensor table;
    at::ScalarType stored = at::kFloat;  // how the merged op holds the table: fp32, bf16 or uint8 row-wise
    at::ScalarType out = at::kFloat;     // what the call returned
    int64_t mode = 0;
    bool include_last_offset = false;
    int64_t padding_idx = -1;  // normalized: a row, or -1
    std::string index_dtype;   // "Long", "Int", or "" when the graph does not say
};

// What calls must share to be merged.
using GroupKey = std::tuple<torch::jit::Block *, int64_t, bool, std::string, at::ScalarType, at::ScalarType>;

void read_index_dtype(Call &call) {
    if (const auto type = call.node->input(1)->type()->cast<c10::TensorType>())
        if (type->scalarType()) call.index_dtype = c10::toString(*type->scalarType());
}

// A quantized::embedding_bag_byte_rowwise_offsets call over a constant prepacked table (uint8
// rows with their scale and bias: the merged op's own layout), or nullopt with the reason.
std::optional<Call> read_byte_call(Node *node, std::string *why) {
    Call call;
    call.node = node;
    const auto table = constant_tensor(node->input(0));
    if (!table || table->dim() != 2 || table->scalar_type() != at::kByte || table->size(1) < 8) {
        *why = "the table is not a constant prepacked uint8 matrix [rows, dim + 8]";
        return std::nullopt;
    }
    call.table = *table;
    call.stored = at::kByte;
    // aten's byte op pools mode 1 as a sum in libtorch 1.13: only sum calls are taken, so the
    // merged op computes what the model did.
    if (constant_int(node->input(4)) != 0) {
        *why = "a byte row-wise call with a mode other than sum (0) is not merged";
        return std::nullopt;
    }
    if (is_constant_none(node->input(2)) || constant_bool(node->input(5)) != false ||
        !is_constant_none(node->input(7))) {
        *why = "offsets absent, pruned_weights or compressed_indices_mapping";
        return std::nullopt;
    }
    const auto last = constant_bool(node->input(8));
    if (!last) {
        *why = "include_last_offset is not constant";
        return std::nullopt;
    }
    call.include_last_offset = *last;
    read_index_dtype(call);
    return call;
}

// The call's arguments, or nullopt with the reason it stays.
std::optional<Call> read_call(Node *node, std::string *why) {
    if (node->kind() == kByteBag) return read_byte_call(node, why);
    Call call;
    call.node = node;
    const auto table = constant_tensor(node->input(0));
    if (!table || table->dim() != 2 || (table->scalar_type() != at::kFloat && table->scalar_type() != at::kBFloat16)) {
        *why = "the table is not a constant fp32 or bf16 matrix";
        return std::nullopt;
    }
    call.table = *table;
    call.stored = call.out = table->scalar_type();
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
    read_index_dtype(call);
    return call;
}

// How the merged op stores a table the options convert (uint8 first, then bf16 for fp32).
at::ScalarType stored_as(const Call &call, const TableOptions &options) {
    if (call.stored == at::kByte) return at::kByte;
    if (options.uint8_rowwise) return at::kByte;
    if (options.bf16 && call.stored == at::kFloat) return at::kBFloat16;
    return call.stored;
}

int64_t bytes_of(const at::Tensor &t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

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

// The table bytes the merged calls read before and after (each table once).
struct TableBytes {
    int64_t before = 0, after = 0, uint8_tables = 0;
};

// Replaces the group's calls by one merged op after the last of them.
void merge(torch::jit::Graph &graph, const std::vector<Call> &group, TableBytes &bytes) {
    Node *last = group.back().node;
    torch::jit::WithInsertPoint guard(last->next());
    std::vector<Value *> tables, indices, offsets, weights;
    std::vector<int64_t> padding;
    const at::ScalarType stored = group.front().stored;
    std::map<Value *, Value *> converted;  // a table two calls read is converted (and counted) once
    for (const Call &call : group) {
        Value *table = call.node->input(0);
        Value *&as_stored = converted[table];
        if (!as_stored) {
            bytes.before += bytes_of(call.table);
            if (call.table.scalar_type() == stored) {
                as_stored = table;
            } else {
                const bool to_uint8 = stored == at::kByte;
                const at::Tensor data =
                    to_uint8 ? ops::recsys::quantize_rows_uint8(call.table) : call.table.to(stored);
                as_stored = graph.insertConstant(data);
                if (table->hasDebugName()) as_stored->setDebugName(table->debugName() + (to_uint8 ? "_uint8" : "_bf16"));
            }
            const at::Tensor held = *constant_tensor(as_stored);
            bytes.after += bytes_of(held);
            bytes.uint8_tables += held.scalar_type() == at::kByte;
        }
        tables.push_back(as_stored);
        indices.push_back(call.node->input(1));
        offsets.push_back(call.node->input(2));
        weights.push_back(call.node->input(6));
        padding.push_back(call.padding_idx);
    }
    const auto tensor = c10::TensorType::get();
    // The calls' own dtype, unless it is what the merged op returns by default.
    const at::ScalarType out = group.front().out;
    const at::ScalarType default_out = stored == at::kByte ? at::kFloat : stored;
    Value *dtype = out != default_out ? graph.insertConstant(static_cast<int64_t>(out))
                                      : graph.insertConstant(c10::IValue());
    Node *merged = graph.create(
        kMerged,
        {list_of(graph, tensor, tables), list_of(graph, tensor, indices), list_of(graph, tensor, offsets),
         list_of(graph, c10::OptionalType::create(tensor), weights), graph.insertConstant(padding),
         graph.insertConstant(group.front().mode), graph.insertConstant(group.front().include_last_offset), dtype,
         graph.insertConstant(false)},  // sparse: an optimized model is not trained
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

PassResult merge_embedding_bags(std::shared_ptr<torch::jit::Graph> &graph, const TableOptions &options) {
    PassResult result;
    // Candidates by what they must share, in program order.
    std::map<GroupKey, std::vector<Call>> candidates;
    std::vector<GroupKey> order;
    for (Node *node : collect_nodes_of_kind(graph->block(), {c10::aten::embedding_bag, kByteBag})) {
        std::string why;
        auto call = read_call(node, &why);
        if (!call) {
            result.skipped.push_back(node_label(node) + ": " + why);
            continue;
        }
        call->stored = stored_as(*call, options);
        const GroupKey key{node->owningBlock(), call->mode,   call->include_last_offset,
                           call->index_dtype,   call->stored, call->out};
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
    TableBytes bytes;
    for (const std::vector<Call> &group : groups) {
        // A lone table still changes when asked for in uint8 (--embedding-int8).
        const bool converts = !group.empty() && group.front().stored == at::kByte &&
                              group.front().table.scalar_type() != at::kByte;
        if (group.size() < 2 && !converts) {
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
        merge(*graph, group, bytes);
        ++result.count;
    }
    result.changed = result.count > 0;
    result.details = {{"tables", result.modules.size()},
                      {"table_bytes_before", bytes.before},
                      {"table_bytes_after", bytes.after},
                      {"uint8_tables", bytes.uint8_tables}};
    return result;
}

}  // namespace ipex::passes
