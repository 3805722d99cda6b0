#include "passes/remove_dropout.h"

#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;

const std::vector<c10::Symbol> &dropout_kinds() {
    static const std::vector<c10::Symbol> kinds = {
        c10::Symbol::fromQualString("aten::dropout"),
        c10::Symbol::fromQualString("aten::dropout_"),
        c10::Symbol::fromQualString("aten::feature_dropout"),
        c10::Symbol::fromQualString("aten::feature_dropout_"),
        c10::Symbol::fromQualString("aten::alpha_dropout"),
        c10::Symbol::fromQualString("aten::alpha_dropout_"),
        c10::Symbol::fromQualString("aten::feature_alpha_dropout"),
        c10::Symbol::fromQualString("aten::feature_alpha_dropout_"),
    };
    return kinds;
}

// Every variant is (input, p, train) -> Tensor.
constexpr size_t kDropoutInputs = 3;
constexpr size_t kTrainIndex = 2;

}  // namespace

PassResult remove_dropout(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    for (Node *node : collect_nodes_of_kind(graph->block(), dropout_kinds())) {
        const std::string label = node_label(node);
        if (node->inputs().size() != kDropoutInputs || node->outputs().size() != 1) {
            result.skipped.push_back(label + ": unexpected " + node->kind().toQualString() + " signature");
            continue;
        }
        const auto train = constant_bool(node->input(kTrainIndex));
        if (!train) {
            result.skipped.push_back(label + ": " + node->kind().toQualString() +
                                     " train flag is not a constant (freeze the model in eval mode)");
            continue;
        }
        if (*train) {
            result.skipped.push_back(label + ": " + node->kind().toQualString() +
                                     " has training=True written explicitly; kept as the user asked");
            continue;
        }
        node->output()->replaceAllUsesWith(node->input(0));
        node->destroy();
        result.modules.push_back(label);
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
