#include "passes/fuse_conv_sum.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// `node` itself, or the node of `block` that contains it (nested in an if/loop), or null.
const Node *ancestor_in(const Node *node, const torch::jit::Block *block) {
    while (node && node->owningBlock() != block) node = node->owningBlock()->owningNode();
    return node;
}

// Whether the sum of `conv` at `user` may write its result into `other`: `other` is computed
// in the graph (it may alias no graph input and no constant), the conv does not read it, and
// neither it nor anything that may alias it is returned by the graph or read after `user`.
bool may_write_other(const torch::jit::Graph &graph, torch::jit::AliasDb &aliases, const Node *conv,
                     const Value *other, const Node *user) {
    if (aliases.mayAlias(conv->input(0), other)) return false;
    std::vector<const Value *> values(graph.inputs().begin(), graph.inputs().end());
    std::vector<const torch::jit::Block *> blocks{graph.block()};
    while (!blocks.empty()) {
        const torch::jit::Block *block = blocks.back();
        blocks.pop_back();
        for (const Node *node : block->nodes()) {
            values.insert(values.end(), node->outputs().begin(), node->outputs().end());
            blocks.insert(blocks.end(), node->blocks().begin(), node->blocks().end());
        }
    }
    for (const Value *value : values) {
        if (value != other && !aliases.mayAlias(value, other)) continue;
        const auto kind = value->node()->kind();
        if (kind == c10::prim::Param || kind == c10::prim::Constant || is_graph_output(value)) return false;
        for (const auto &use : value->uses()) {
            if (use.user == user) continue;
            const Node *reader = ancestor_in(use.user, user->owningBlock());
            if (!reader || !reader->isBefore(user)) return false;
        }
    }
    return true;
}

}  // namespace

PassResult fuse_conv_sum(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    static const auto convolution = c10::Symbol::fromQualString(ops::kConvolution);
    LazyAliasDb aliases(graph);
    for (Node *node : collect_nodes_of_kind(graph->block(), {convolution})) {
        // An activation already fused (relu(conv(x)) + y) stays before the add: oneDNN 2.6 takes
        // post-ops of an activation then a sum only in its reference kernel on AVX2 CPUs (a
        // 16x256x56x56 1x1 convolution took 12 s), and the model may run on any CPU.
        const bool activated = !conv_context(node)->post_ops().empty();
        const auto taken = take_binary_user(aliases, node, [activated](const BinaryUse &use) -> std::string {
            if (use.op != "add") return kNotThisPass;
            if (!use.output_first && use.alpha != 1.0) return "alpha scales the convolution output";
            return activated ? "an activation before the sum" : "";
        }, result.skipped);
        if (!taken) continue;
        Node *user = taken->first;
        const BinaryUse *use = &taken->second;
        const bool in_place = may_write_other(*graph, aliases.get(), node, use->other, user);
        const auto ctx = conv_context(node)->with_post_ops({ops::PostOp{"sum", use->output_first ? use->alpha : 1.0}},
                                                           in_place);
        Value *ctx_value = insert_constant_at_top(*graph, c10::IValue(ctx), node);
        const std::string label = node_label(node);
        Node *fused = replace_node(*graph, node, in_place ? ops::kConvolutionSumInPlace : ops::kConvolutionSum,
                                   {node->input(0), use->other, ctx_value});
        fused->output()->setType(user->output()->type());
        user->output()->replaceAllUsesWith(fused->output());
        user->destroy();
        aliases.invalidate();
        result.modules.push_back(label + (in_place ? "+sum(in place)" : "+sum"));
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
