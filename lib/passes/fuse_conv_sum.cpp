#include "passes/fuse_conv_sum.h"

#include "passes/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {

using torch::jit::Node;
using torch::jit::Value;

PassResult fuse_conv_sum(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    static const auto convolution = c10::Symbol::fromQualString(ops::kConvolution);
    for (Node *node : collect_nodes_of_kind(graph->block(), {convolution})) {
        Node *user = single_user(node->output());
        if (!user) continue;
        std::string why;
        const auto use = binary_use(node, user, &why);
        if (use && use->op != "add") continue;
        if (use && !use->output_first && use->alpha != 1.0) why = "alpha scales the convolution output";
        if (!use || !why.empty()) {
            if (!why.empty())
                result.skipped.push_back(node_label(user) + ": " + user->kind().toQualString() + " kept (" + why + ")");
            continue;
        }
        const Node *producer = use->other->node();
        const bool in_place = is_prepacked(producer) && use->other->uses().size() == 1 && !is_graph_output(use->other);
        const auto ctx = conv_context(node)->with_post_ops({ops::PostOp{"sum", use->output_first ? use->alpha : 1.0}},
                                                           in_place);
        Value *ctx_value = insert_constant_at_top(*graph, c10::IValue(ctx), node);
        const std::string label = node_label(node);
        Node *fused = replace_node(*graph, node, ops::kConvolutionSum, {node->input(0), use->other, ctx_value});
        fused->output()->setType(user->output()->type());
        user->output()->replaceAllUsesWith(fused->output());
        // The add now follows its own result; move the fused node to where the add was, so
        // `other` (computed between the two) is available.
        fused->moveBefore(user);
        user->destroy();
        result.modules.push_back(label + (in_place ? "+sum(in place)" : "+sum"));
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
