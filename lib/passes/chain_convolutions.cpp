#include "passes/chain_convolutions.h"

#include <torch/csrc/jit/ir/constants.h>

#include <optional>
#include <string>
#include <unordered_set>

#include "ops/ops.h"
#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// ipex::convolution with its context a constant (as prepacking makes it).
bool is_plain_convolution(const Node *node) {
    return node->kind().toQualString() == std::string(ops::kConvolution) &&
           node->inputs().back()->node()->kind() == c10::prim::Constant;
}

// The convolution that is the only reader of `node`'s output, reading it as its input.
Node *next_in_chain(const Node *node) {
    Node *user = single_user(node->output());
    if (!user || !is_plain_convolution(user) || user->input(0) != node->output() ||
        user->owningBlock() != node->owningBlock())
        return nullptr;
    return user;
}

// The chain op goes where the first convolution is: it reads the input there as that one did,
// every reader of the last one's output comes after it, and what the later convolutions read
// (the outputs before them, constant contexts) nothing else reads or writes, so computing them
// earlier changes nothing. `extra` inputs (constants) follow the list of contexts, and `last`
// is what the op's output replaces (the last convolution, or a pooling of it).
Node *make_chain(torch::jit::Graph &graph, const std::vector<Node *> &chain, const char *kind,
                 const std::vector<c10::IValue> &extra = {}, Node *last = nullptr) {
    if (!last) last = chain.back();
    torch::jit::WithInsertPoint guard(chain.front());
    std::vector<Value *> contexts;
    for (Node *conv : chain) contexts.push_back(conv->inputs().back());
    Node *list = graph.insertNode(graph.createList(contexts.front()->type(), contexts));
    std::vector<Value *> inputs{chain.front()->input(0), list->output()};
    for (const c10::IValue &value : extra) inputs.push_back(graph.insertConstant(value));
    Node *op = graph.insertNode(graph.create(c10::Symbol::fromQualString(kind), inputs));
    copy_origin(list, chain.front());
    copy_origin(op, chain.front());
    op->output()->setType(last->output()->type());
    last->output()->replaceAllUsesWith(op->output());
    if (last != chain.back()) last->destroy();
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) (*it)->destroy();
    return op;
}

}  // namespace

std::vector<c10::intrusive_ptr<ops::ConvolutionContext>> chain_contexts(const Node *node) {
    std::vector<c10::intrusive_ptr<ops::ConvolutionContext>> found;
    const Value *list = node->input(1);
    if (const auto constant = torch::jit::toIValue(list)) {
        for (const c10::IValue &item : constant->toListRef())
            found.push_back(item.toCustomClass<ops::ConvolutionContext>());
        return found;
    }
    TORCH_INTERNAL_ASSERT(list->node()->kind() == c10::prim::ListConstruct, "convolution chain without a list");
    for (const Value *item : list->node()->inputs()) {
        const auto ctx = torch::jit::toIValue(item);
        TORCH_INTERNAL_ASSERT(ctx && ctx->isObject(), "convolution chain with a context that is not a constant");
        found.push_back(ctx->toCustomClass<ops::ConvolutionContext>());
    }
    return found;
}

PassResult chain_convolutions(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    std::unordered_set<const Node *> taken;
    int convolutions = 0, pooled = 0;
    static const std::vector<c10::Symbol> kinds = {c10::Symbol::fromQualString(ops::kConvolution)};
    for (Node *first : collect_nodes_of_kind(graph->block(), kinds)) {
        if (taken.count(first) || !is_plain_convolution(first)) continue;
        std::vector<Node *> chain{first};
        while (Node *next = next_in_chain(chain.back())) chain.push_back(next);
        taken.insert(chain.begin(), chain.end());
        Node *pool = nullptr;
        const auto pool_args = pool_after(chain.back(), "ipex::max_pool2d", &pool);
        if (chain.size() < 2 && !pool_args) continue;
        std::string label;
        for (const Node *conv : chain) label += (label.empty() ? "" : "+") + node_label(conv);
        if (pool_args) {
            label += "+" + node_label(pool);
            make_chain(*graph, chain, ops::kConvolutionMaxPool, *pool_args, pool);
            ++pooled;
        } else {
            make_chain(*graph, chain, ops::kConvolutionChain);
        }
        result.modules.push_back(label);
        convolutions += static_cast<int>(chain.size());
        ++result.count;
    }
    result.changed = result.count > 0;
    result.details = {{"chains", result.count}, {"convolutions", convolutions}, {"pooled", pooled}};
    return result;
}

}  // namespace ipex::passes
