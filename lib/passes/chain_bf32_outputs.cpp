#include "passes/chain_bf32_outputs.h"

#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;

std::string dtype_of(const Node *node) {
    return is_prepacked_conv(node) ? conv_context(node)->dtype() : linear_context(node)->dtype();
}

bool is_bf32(const Node *node) {
    if (!is_prepacked(node)) return false;
    const std::string dtype = dtype_of(node);
    return dtype == "bf32" || dtype == ops::kBf32ToBf16;
}

}  // namespace

PassResult chain_bf32_outputs(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    for (Node *node : collect_nodes(graph->block())) {
        if (!is_bf32(node) || dtype_of(node) != "bf32" || node->output()->uses().empty()) continue;
        bool only_bf32_inputs = true;
        for (const auto &use : node->output()->uses())
            only_bf32_inputs &= use.offset == 0 && is_bf32(use.user);
        if (!only_bf32_inputs) continue;
        if (is_prepacked_conv(node))
            set_context(*graph, node, c10::IValue(conv_context(node)->with_dtype(ops::kBf32ToBf16)));
        else
            set_context(*graph, node, c10::IValue(linear_context(node)->with_dtype(ops::kBf32ToBf16)));
        result.modules.push_back(node_label(node));
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
