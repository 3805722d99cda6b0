#include "passes/fuse_channel_shuffle.h"

#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kChannelShuffle = c10::Symbol::fromQualString("ipex::channel_shuffle");
const c10::Symbol kChannelShuffleChunk = c10::Symbol::fromQualString("ipex::channel_shuffle_chunk");

bool is_int_list(const Value *v) {
    return v->type()->kind() == c10::TypeKind::ListType &&
           v->type()->containedType(0)->kind() == c10::TypeKind::IntType;
}

// aten::view / aten::reshape to a list of sizes.
bool is_resize(const Node *node) {
    return (node->kind() == c10::aten::view || node->kind() == c10::aten::reshape) && node->inputs().size() == 2 &&
           is_int_list(node->input(1));
}

// How many sizes `list` holds, when the graph says (a constant or a prim::ListConstruct).
std::optional<size_t> list_length(const Value *list) {
    if (const auto constant = constant_int_list(list)) return constant->size();
    if (list->node()->kind() == c10::prim::ListConstruct) return list->node()->inputs().size();
    return std::nullopt;
}

// transpose(1, 2) / transpose(2, 1), or permute([0, 2, 1, 3, 4]), of the tensor `resize` (a
// view/reshape) made; dims counted from the end only when `resize` names 5 sizes (its rank).
bool swaps_dims_1_2(const Node *node, const Node *resize) {
    if (node->kind() == c10::aten::transpose && node->inputs().size() == 3) {
        auto a = constant_int(node->input(1)), b = constant_int(node->input(2));
        if (!a || !b) return false;
        if (*a < 0 || *b < 0) {
            if (list_length(resize->input(1)) != 5u) return false;
            if (*a < 0) *a += 5;
            if (*b < 0) *b += 5;
        }
        return (*a == 1 && *b == 2) || (*a == 2 && *b == 1);
    }
    if (node->kind() == c10::aten::permute && node->inputs().size() == 2) {
        const auto order = constant_int_list(node->input(1));
        return order && *order == std::vector<int64_t>{0, 2, 1, 3, 4};
    }
    return false;
}

bool is_plain_contiguous(const Node *node) {
    if (node->kind() != c10::aten::contiguous) return false;
    const auto format = node->inputs().size() == 2 ? constant_int(node->input(1)) : std::nullopt;
    return format && *format == static_cast<int64_t>(at::MemoryFormat::Contiguous);
}

// The shuffle chain from `first` (a view/reshape) to its last view/reshape: the nodes in order,
// or empty when `first` does not start one.
std::vector<Node *> chain_from(Node *first) {
    if (!is_resize(first)) return {};
    Node *swap = single_user(first->output());
    if (!swap || !swaps_dims_1_2(swap, first) || swap->input(0) != first->output()) return {};
    Node *next = single_user(swap->output());
    if (!next) return {};
    if (is_plain_contiguous(next)) {
        Node *last = single_user(next->output());
        if (!last || !is_resize(last) || last->input(0) != next->output()) return {};
        return {first, swap, next, last};
    }
    if (next->kind() == c10::aten::reshape && is_resize(next) && next->input(0) == swap->output())
        return {first, swap, next};
    return {};
}

// The aten::cat along dim 1 producing `x` (inputs in a prim::ListConstruct), read besides
// `reader` only by aten::size(x, constant dim) queries: the cat node, else nullptr.
Node *foldable_cat(Value *x, const Node *reader) {
    Node *cat = x->node();
    if (cat->kind() != c10::aten::cat || cat->inputs().size() != 2) return nullptr;
    const auto dim = constant_int(cat->input(1));
    if (!dim || *dim != 1 || cat->input(0)->node()->kind() != c10::prim::ListConstruct) return nullptr;
    for (const auto &use : x->uses()) {
        if (use.user == reader) continue;
        if (use.user->kind() != c10::aten::size || use.user->inputs().size() != 2 || !constant_int(use.user->input(1)))
            return nullptr;
    }
    return cat;
}

// aten::size(cat, d) answered from the cat's inputs: dim 1 is the sum of theirs, any other
// dim the first input's (the cat checked they agree). Dims counted from the end need the rank:
// 4, as the op's fast path; the op's fallback (any rank) sees no query either way.
bool answer_size_queries(torch::jit::Graph &graph, Node *cat, const Node *reader) {
    Value *x = cat->output();
    const auto parts = cat->input(0)->node()->inputs();
    std::vector<std::pair<Node *, int64_t>> queries;  // each with its dim counted from the start
    for (const auto &use : x->uses()) {
        if (use.user == reader) continue;
        int64_t d = *constant_int(use.user->input(1));
        if (d < 0) {
            const auto type = x->type()->cast<c10::TensorType>();
            if (!type || !type->dim()) return false;
            d += static_cast<int64_t>(*type->dim());
            if (d < 0) return false;
        }
        queries.emplace_back(use.user, d);
    }
    for (const auto &[query, d] : queries) {
        torch::jit::WithInsertPoint guard(query);
        Value *answer = nullptr;
        if (d != 1) {
            answer = graph.insert(c10::aten::size, {parts[0], d});
        } else {
            for (Value *part : parts) {
                Value *size = graph.insert(c10::aten::size, {part, 1});
                answer = answer ? graph.insert(c10::aten::add, {answer, size}) : size;
            }
        }
        query->output()->replaceAllUsesWith(answer);
        query->destroy();
    }
    return true;
}

// aten::chunk(x, constant chunks, 1) as the one reader of x: the chunk node, else nullptr.
Node *chunk_reader(const Value *x) {
    Node *chunk = single_user(x);
    if (!chunk || chunk->kind() != c10::aten::chunk || chunk->inputs().size() != 3 || chunk->input(0) != x)
        return nullptr;
    const auto chunks = constant_int(chunk->input(1));
    const auto dim = constant_int(chunk->input(2));
    return chunks && dim && *dim == 1 ? chunk : nullptr;
}

}  // namespace

PassResult fuse_channel_shuffle(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    int with_cat = 0, with_chunk = 0;
    // The last view of a replaced chain is in the list too, after its first: never touched again.
    std::unordered_set<const Node *> destroyed;
    for (Node *first : collect_nodes_of_kind(graph->block(), {c10::aten::view, c10::aten::reshape})) {
        if (destroyed.count(first)) continue;
        const std::vector<Node *> chain = chain_from(first);
        if (chain.empty()) continue;
        Node *last = chain.back();
        if (is_graph_output(last->output())) {
            result.skipped.push_back(node_label(last) + ": the shuffled tensor is a graph output");
            continue;
        }
        Value *x = first->input(0);
        // A plain contiguous() before the first view (what contiguous_before_view adds, as in a
        // graph prepared for quantization) joins the op: its result is the same either way.
        Node *leading = x->node();
        if (is_plain_contiguous(leading) && single_user(x) == first) {
            x = leading->input(0);
        } else {
            leading = nullptr;
        }
        Node *cat = foldable_cat(x, leading ? leading : first);
        // The queries are answered before the op goes in, so they stay where they were.
        if (cat && !answer_size_queries(*graph, cat, leading ? leading : first)) cat = nullptr;
        // A chunk along the channels as the only reader: the op writes the chunks instead.
        Node *chunk = chunk_reader(last->output());
        if (chunk && is_graph_output(chunk->output())) chunk = nullptr;
        Node *replaced = chunk ? chunk : last;
        torch::jit::WithInsertPoint guard(replaced);
        Value *inputs = cat ? cat->input(0) : graph->insertNode(graph->createList(x->type(), {x}))->output();
        std::vector<Value *> args = {inputs, first->input(1), last->input(1)};
        if (chunk) args.push_back(chunk->input(1));
        Node *op = graph->create(chunk ? kChannelShuffleChunk : kChannelShuffle, args, 1);
        graph->insertNode(op);
        op->output()->setType(replaced->output()->type());
        op->copyMetadata(replaced);
        replaced->output()->replaceAllUsesWith(op->output());
        if (chunk) {
            chunk->destroy();
            ++with_chunk;
        }
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            destroyed.insert(*it);
            (*it)->destroy();
        }
        if (leading) leading->destroy();
        if (cat) {
            cat->destroy();
            ++with_cat;
        }
        result.modules.push_back(node_label(op));
        ++result.count;
    }
    result.changed = result.count > 0;
    result.details = {{"with_cat", with_cat}, {"with_chunk", with_chunk}};
    return result;
}

}  // namespace ipex::passes
