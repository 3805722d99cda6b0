#include "passes/prepacked_nodes.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include "ir/graph_utils.h"

namespace ipex::passes {

using torch::jit::Node;
using torch::jit::Value;

bool is_prepacked_conv(const Node *node) {
    const std::string kind = node->kind().toQualString();
    return kind == ops::kConvolution || kind == ops::kConvolutionSum || kind == ops::kConvolutionSumInPlace;
}

bool is_prepacked_linear(const Node *node) {
    const std::string kind = node->kind().toQualString();
    return kind == ops::kLinear || kind == ops::kLinearBinary;
}

bool is_prepacked(const Node *node) { return is_prepacked_conv(node) || is_prepacked_linear(node); }

namespace {

c10::IValue context_value(const Node *node) {
    const auto ivalue = torch::jit::toIValue(node->inputs().back());
    TORCH_INTERNAL_ASSERT(ivalue && ivalue->isObject(), "prepacked node without a constant context");
    return *ivalue;
}

}  // namespace

c10::intrusive_ptr<ops::ConvolutionContext> conv_context(const Node *node) {
    return context_value(node).toCustomClass<ops::ConvolutionContext>();
}

c10::intrusive_ptr<ops::LinearContext> linear_context(const Node *node) {
    return context_value(node).toCustomClass<ops::LinearContext>();
}

const ops::PostOps &post_ops_of(const Node *node) {
    return is_prepacked_conv(node) ? conv_context(node)->post_ops() : linear_context(node)->post_ops();
}

void set_context(torch::jit::Graph &graph, Node *node, const c10::IValue &context) {
    Value *constant = insert_constant_at_top(graph, context, node);
    node->replaceInput(node->inputs().size() - 1, constant);
}

Node *single_user(const Value *value) {
    return value->uses().size() == 1 ? value->uses()[0].user : nullptr;
}

std::optional<std::vector<c10::IValue>> pool_after(const Node *producer, const char *kind, Node **pool) {
    Node *user = single_user(producer->output());
    if (!user || user->kind() != c10::Symbol::fromQualString(kind) || user->inputs().size() != 6 ||
        user->input(0) != producer->output() || user->owningBlock() != producer->owningBlock())
        return std::nullopt;
    std::vector<c10::IValue> args;
    for (size_t i = 1; i < 5; ++i) {
        const auto list = constant_int_list(user->input(i));
        if (!list) return std::nullopt;
        args.emplace_back(*list);
    }
    const auto ceil_mode = constant_bool(user->input(5));
    if (!ceil_mode) return std::nullopt;
    args.emplace_back(*ceil_mode);
    *pool = user;
    return args;
}

Node *replace_node(torch::jit::Graph &graph, Node *node, const char *kind, const std::vector<Value *> &inputs) {
    torch::jit::WithInsertPoint guard(node);
    Node *created = graph.insertNode(graph.create(c10::Symbol::fromQualString(kind), inputs));
    copy_origin(created, node);
    created->output()->setType(node->output()->type());
    node->output()->replaceAllUsesWith(created->output());
    node->destroy();
    return created;
}

}  // namespace ipex::passes

namespace ipex::passes {

std::optional<BinaryUse> binary_use(const Node *producer, const Node *user, std::string *why) {
    if (user->kind().ns().toUnqualString() != std::string("aten") || user->outputs().size() != 1) return std::nullopt;
    std::string name = user->kind().toUnqualString();
    const bool in_place = !name.empty() && name.back() == '_';
    if (in_place) name.pop_back();
    if (name != "add" && name != "mul") return std::nullopt;
    if (user->inputs().size() < 2) return std::nullopt;
    const Value *y = producer->output();
    BinaryUse use;
    use.op = name;
    if (user->input(0) == y && user->input(1) != y) {
        use.other = user->input(1);
    } else if (user->input(1) == y && user->input(0) != y) {
        use.other = user->input(0);
        use.output_first = false;
    } else {
        return std::nullopt;
    }
    if (use.other->type()->kind() != c10::TypeKind::TensorType) {
        *why = "the other operand is not a tensor";
        return std::nullopt;
    }
    if (in_place && !use.output_first) {
        *why = "it writes into the other operand";
        return std::nullopt;
    }
    if (name == "add") {
        const auto alpha = constant_double(input_named(user, "alpha"));
        if (!alpha) {
            *why = "alpha is not a constant";
            return std::nullopt;
        }
        use.alpha = *alpha;
    }
    // With both shapes known, the other operand must not broadcast the output to a larger shape.
    const auto y_type = y->type()->cast<c10::TensorType>();
    const auto other_type = use.other->type()->cast<c10::TensorType>();
    const auto y_sizes = y_type ? y_type->sizes().concrete_sizes() : c10::nullopt;
    const auto other_sizes = other_type ? other_type->sizes().concrete_sizes() : c10::nullopt;
    if (y_sizes && other_sizes) {
        bool fits = other_sizes->size() <= y_sizes->size();
        for (size_t i = 0; fits && i < other_sizes->size(); ++i) {
            const int64_t o = (*other_sizes)[other_sizes->size() - 1 - i], d = (*y_sizes)[y_sizes->size() - 1 - i];
            fits = o == d || o == 1;
        }
        if (!fits) {
            *why = "the other operand broadcasts the output to a larger shape";
            return std::nullopt;
        }
    }
    return use;
}

torch::jit::AliasDb &LazyAliasDb::get() {
    if (!db_) db_ = std::make_unique<torch::jit::AliasDb>(graph_);
    return *db_;
}

std::optional<std::pair<Node *, BinaryUse>> take_binary_user(
    LazyAliasDb &aliases, Node *node, const std::function<std::string(const BinaryUse &)> &reject,
    std::vector<std::string> &skipped) {
    Node *user = single_user(node->output());
    if (!user) return std::nullopt;
    std::string why;
    auto use = binary_use(node, user, &why);
    if (use && why.empty()) why = reject(*use);
    // The fused op runs where the add/mul was (`other` may be computed in between), which
    // must not move the conv/linear past a write to its input.
    if (use && why.empty() && !aliases.get().moveBeforeTopologicallyValid(node, user))
        why = "its input is written between the op and the " + use->op;
    if (!use || !why.empty()) {
        if (!why.empty() && why != kNotThisPass)
            skipped.push_back(node_label(user) + ": " + user->kind().toQualString() + " kept (" + why + ")");
        return std::nullopt;
    }
    return std::make_pair(user, *use);
}

}  // namespace ipex::passes
