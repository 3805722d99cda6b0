#include "passes/fuse_interaction.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kInteraction = c10::Symbol::fromQualString("ipex::interaction");
const c10::Symbol kTrilIndices = c10::Symbol::fromQualString("aten::tril_indices");

bool is_kind(const Node *node, c10::Symbol kind) { return node->kind() == kind; }

bool is_list(const Value *value) { return value->type()->kind() == c10::TypeKind::ListType; }

// Uses of a list that read it without changing it.
bool reads_list(const Node *node) {
    static const c10::Symbol kinds[] = {c10::aten::cat, c10::aten::stack,       c10::aten::add,
                                        c10::aten::len, c10::aten::__getitem__, c10::prim::ListUnpack};
    return std::find(std::begin(kinds), std::end(kinds), node->kind()) != std::end(kinds);
}

// The elements `list` holds when `reader` reads it: a ListConstruct and the appends to it
// before the reader (in the same block, nothing else changing it), or a sum of such lists.
std::optional<std::vector<Value *>> list_elements(Value *list, Node *reader) {
    Node *node = list->node();
    if (is_kind(node, c10::aten::add) && is_list(node->output())) {
        auto front = list_elements(node->input(0), node), back = list_elements(node->input(1), node);
        if (!front || !back) return std::nullopt;
        front->insert(front->end(), back->begin(), back->end());
        return front;
    }
    if (!is_kind(node, c10::prim::ListConstruct) || reader->owningBlock() != node->owningBlock()) return std::nullopt;
    std::vector<Node *> appends;
    for (const auto &use : list->uses()) {
        Node *user = use.user;
        if (is_kind(user, c10::aten::append) && use.offset == 0) {
            if (user->owningBlock() != node->owningBlock()) return std::nullopt;  // in a loop or a branch
            if (user->isBefore(reader)) appends.push_back(user);
        } else if (!reads_list(user)) {
            return std::nullopt;
        }
    }
    std::sort(appends.begin(), appends.end(), [](Node *a, Node *b) { return a->isBefore(b); });
    std::vector<Value *> elements(node->inputs().begin(), node->inputs().end());
    for (Node *append : appends) elements.push_back(append->input(1));
    return elements;
}

// dim as a non-negative dim of a tensor of `rank` dims, or nullopt.
std::optional<int64_t> dim_of(const Value *value, int64_t rank) {
    const auto dim = constant_int(value);
    if (!dim || *dim < -rank || *dim >= rank) return std::nullopt;
    return *dim < 0 ? *dim + rank : *dim;
}

// The stacked features T, read: the features and the view's sizes (nullptr: stacked).
struct Stacked {
    std::vector<Value *> features;
    Value *view_size = nullptr;
};

std::optional<Stacked> read_stacked(Value *t) {
    Node *node = t->node();
    Stacked s;
    if (is_kind(node, c10::aten::stack)) {
        if (dim_of(node->input(1), 3) != 1) return std::nullopt;
        const auto features = list_elements(node->input(0), node);
        if (!features) return std::nullopt;
        s.features = *features;
        return s;
    }
    if (!is_kind(node, c10::aten::view) && !is_kind(node, c10::aten::reshape)) return std::nullopt;
    Node *cat = node->input(0)->node();
    if (!is_kind(cat, c10::aten::cat) || dim_of(cat->input(1), 2) != 1) return std::nullopt;
    const auto features = list_elements(cat->input(0), cat);
    if (!features || !node->input(1)->type()->isSubtypeOf(*c10::ListType::ofInts())) return std::nullopt;
    s.features = *features;
    s.view_size = node->input(1);
    return s;
}

// A value and the dtype it was cast to (aten::to(value, dtype), cast_to_lowp's casts before a
// bf16 bmm), or the value itself and nullopt.
std::pair<Value *, std::optional<int64_t>> uncast(Value *value) {
    Node *node = value->node();
    if (!is_kind(node, c10::aten::to) || node->inputs().size() != 5 ||
        node->input(1)->type()->kind() != c10::TypeKind::IntType)
        return {value, std::nullopt};
    const auto dtype = constant_int(node->input(1));
    if (!dtype) return {value, std::nullopt};
    return {node->input(0), dtype};
}

// Whether `tt` is t with its last two dims swapped (t of rank 3).
bool is_transposed(Value *tt, Value *t) {
    Node *node = tt->node();
    if (node->input(0) != t) return false;
    if (is_kind(node, c10::aten::transpose)) {
        const auto a = dim_of(node->input(1), 3), b = dim_of(node->input(2), 3);
        return a && b && std::min(*a, *b) == 1 && std::max(*a, *b) == 2;
    }
    if (is_kind(node, c10::aten::permute)) return constant_int_list(node->input(1)) == std::vector<int64_t>{0, 2, 1};
    return false;
}

// Z = bmm(T, T^T), each operand maybe cast to one dtype (before or after the transpose): T and
// the cast's dtype, or nullptr.
std::pair<Value *, std::optional<int64_t>> gram_input(Value *z) {
    Node *node = z->node();
    if (!is_kind(node, c10::aten::bmm) && !is_kind(node, c10::aten::matmul)) return {nullptr, std::nullopt};
    const auto [t, t_dtype] = uncast(node->input(0));
    const auto [tt, tt_dtype] = uncast(node->input(1));
    const Node *transpose = tt->node();
    if (transpose->inputs().empty()) return {nullptr, std::nullopt};
    const auto [inner, inner_dtype] = uncast(transpose->input(0));
    if (tt_dtype && inner_dtype) return {nullptr, std::nullopt};
    if (!is_transposed(tt, transpose->input(0)) || inner != t || t_dtype != (tt_dtype ? tt_dtype : inner_dtype))
        return {nullptr, std::nullopt};
    return {t, t_dtype};
}

// Whether `value` is the feature count F of Z [B, F, F] (or of a slice of Z over dim 0): its
// size 1 or 2, read directly, by index or unpacked.
bool is_feature_count(Value *value, const std::vector<Value *> &zs) {
    Node *node = value->node();
    const auto of_z = [&](Value *v) { return std::find(zs.begin(), zs.end(), v) != zs.end(); };
    if (is_kind(node, c10::aten::size) && node->inputs().size() == 2 && of_z(node->input(0))) {
        const auto dim = dim_of(node->input(1), 3);
        return dim && *dim != 0;
    }
    if (is_kind(node, c10::aten::__getitem__)) {
        Node *size = node->input(0)->node();
        if (!is_kind(size, c10::aten::size) || size->inputs().size() != 1 || !of_z(size->input(0))) return false;
        const auto dim = dim_of(node->input(1), 3);
        return dim && *dim != 0;
    }
    if (is_kind(node, c10::prim::ListUnpack) && node->outputs().size() == 3) {
        Node *size = node->input(0)->node();
        return is_kind(size, c10::aten::size) && size->inputs().size() == 1 && of_z(size->input(0)) &&
               value != node->output(0);
    }
    return false;
}

// The gathered pairs: index tensors (rows, cols), or tril_indices(F, F, offset) (tril set).
struct Pairs {
    Value *rows = nullptr, *cols = nullptr;
    std::optional<at::Tensor> const_rows, const_cols;
    std::optional<int64_t> tril_offset;
};

// rows = t[0], cols = t[1] with t = tril_indices(F, F, offset) over Z's own size.
std::optional<int64_t> tril_of(Value *rows, Value *cols, const std::vector<Value *> &zs) {
    Node *r = rows->node(), *c = cols->node();
    if (!is_kind(r, c10::aten::select) || !is_kind(c, c10::aten::select) || r->input(0) != c->input(0))
        return std::nullopt;
    if (constant_int(r->input(1)) != 0 || constant_int(c->input(1)) != 0 || constant_int(r->input(2)) != 0 ||
        constant_int(c->input(2)) != 1)
        return std::nullopt;
    Node *tril = r->input(0)->node();
    if (!is_kind(tril, kTrilIndices) || !is_feature_count(tril->input(0), zs) || !is_feature_count(tril->input(1), zs))
        return std::nullopt;
    return constant_int(tril->input(2));
}

// Z[:, rows, cols]: Z and the pairs, or nullopt.
std::optional<std::pair<Value *, Pairs>> read_gather(Value *flat) {
    Node *index = flat->node();
    if (!is_kind(index, c10::aten::index)) return std::nullopt;
    Value *z = index->input(0);
    std::vector<Value *> zs{z};
    if (Node *slice = z->node(); is_kind(slice, c10::aten::slice)) {
        // Z[:, ...] in scripted code: a slice over dim 0 from the start to the end, step 1.
        const auto start = constant_int(slice->input(2)), end = constant_int(slice->input(3));
        if (dim_of(slice->input(1), 3) != 0 || constant_int(slice->input(4)) != 1 ||
            !(is_constant_none(slice->input(2)) || start == 0) ||
            !(is_constant_none(slice->input(3)) || (end && *end == std::numeric_limits<int64_t>::max())))
            return std::nullopt;
        z = slice->input(0);
        zs.push_back(z);
    }
    Pairs pairs;
    Node *list = index->input(1)->node();
    if (is_kind(list, c10::prim::ListConstruct)) {
        if (list->inputs().size() != 3 || !is_constant_none(list->input(0)) || is_constant_none(list->input(1)) ||
            is_constant_none(list->input(2)))
            return std::nullopt;
        pairs.rows = list->input(1);
        pairs.cols = list->input(2);
        pairs.tril_offset = tril_of(pairs.rows, pairs.cols, zs);
    } else if (const auto constant = torch::jit::toIValue(index->input(1)); constant && constant->isList()) {
        const c10::List<c10::IValue> items = constant->toList();
        if (items.size() != 3 || !items.get(0).isNone() || !items.get(1).isTensor() || !items.get(2).isTensor())
            return std::nullopt;
        pairs.const_rows = items.get(1).toTensor();
        pairs.const_cols = items.get(2).toTensor();
    } else {
        return std::nullopt;
    }
    return std::make_pair(z, pairs);
}

// Whether `value` is the interaction written as one dot product a pair, stacked: stack of
// sum(mul(a, b), 1) (a Python loop over the pairs, unrolled by tracing or scripting).
bool is_dot_per_pair(Value *value) {
    Node *stack = value->node();
    if (!is_kind(stack, c10::aten::stack)) return false;
    const auto dots = list_elements(stack->input(0), stack);
    if (!dots || dots->empty()) return false;
    for (Value *dot : *dots) {
        Node *sum = dot->node();
        if (!is_kind(sum, c10::aten::sum) || sum->inputs().empty() || !is_kind(sum->input(0)->node(), c10::aten::mul))
            return false;
    }
    return true;
}

}  // namespace

PassResult fuse_interaction(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    for (Node *cat : collect_nodes_of_kind(graph->block(), {c10::aten::cat})) {
        if (dim_of(cat->input(1), 2) != 1) continue;
        const auto parts = list_elements(cat->input(0), cat);
        if (!parts || parts->size() != 2) continue;
        const auto gather = read_gather((*parts)[1]);
        if (!gather) {
            if (is_dot_per_pair((*parts)[1]))
                result.skipped.push_back(node_label(cat) +
                                         ": the interaction is one dot product a pair ((a * b).sum(1) stacked, a "
                                         "Python loop unrolled); not fused: write it as bmm(T, T.transpose(1, 2)) "
                                         "and a gather of the pairs");
            continue;
        }
        const std::string label = node_label(cat);
        const auto [t, dtype] = gram_input(gather->first);
        if (!t) {
            result.skipped.push_back(label + ": the gathered tensor is not bmm(T, T.transpose(1, 2))");
            continue;
        }
        const auto stacked = read_stacked(t);
        if (!stacked) {
            result.skipped.push_back(label + ": T is not the features stacked or concatenated and viewed");
            continue;
        }
        if (stacked->features.empty() || stacked->features.front() != (*parts)[0]) {
            result.skipped.push_back(label + ": the dense vector is not the first feature");
            continue;
        }
        const Pairs &pairs = gather->second;
        torch::jit::WithInsertPoint guard(cat);
        Value *none = graph->insertConstant(c10::IValue());
        Value *rows = none, *cols = none;
        if (pairs.const_rows) {
            rows = graph->insertConstant(*pairs.const_rows);
            cols = graph->insertConstant(*pairs.const_cols);
        } else if (!pairs.tril_offset) {
            rows = pairs.rows;
            cols = pairs.cols;
        }
        Value *features = graph->insertNode(graph->createList(c10::TensorType::get(), stacked->features))->output();
        Node *fused = graph->create(
            kInteraction,
            {features, stacked->view_size ? stacked->view_size : none, rows, cols,
             graph->insertConstant(pairs.tril_offset.value_or(0)), dtype ? graph->insertConstant(*dtype) : none},
            1);
        graph->insertNode(fused);
        fused->output()->setType(cat->output()->type());
        copy_origin(fused, cat);
        cat->output()->replaceAllUsesWith(fused->output());
        cat->destroy();
        result.modules.push_back(label);
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
