#include "passes/fuse_linear_binary.h"

#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {

using torch::jit::Node;
using torch::jit::Value;

PassResult fuse_linear_binary(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    static const auto linear = c10::Symbol::fromQualString(ops::kLinear);
    LazyAliasDb aliases(graph);
    for (Node *node : collect_nodes_of_kind(graph->block(), {linear})) {
        const auto taken = take_binary_user(aliases, node, [](const BinaryUse &use) -> std::string {
            return use.alpha != 1.0 ? "alpha is not 1" : "";
        }, result.skipped);
        if (!taken) continue;
        Node *user = taken->first;
        const BinaryUse *use = &taken->second;
        const auto ctx = linear_context(node)->with_post_ops({ops::PostOp{use->op}});
        Value *ctx_value = insert_constant_at_top(*graph, c10::IValue(ctx), node);
        const std::string label = node_label(node);
        Node *fused = replace_node(*graph, node, ops::kLinearBinary, {node->input(0), use->other, ctx_value});
        fused->output()->setType(user->output()->type());
        user->output()->replaceAllUsesWith(fused->output());
        user->destroy();
        aliases.invalidate();
        result.modules.push_back(label + "+" + use->op);
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
