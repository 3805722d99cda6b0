#include "passes/replace_mul.h"

#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {

PassResult replace_mul(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    int replaced = 0;
    for (torch::jit::Node *mul : collect_nodes_of_kind(graph->block(), {c10::aten::mul})) {
        if (!mul->matches("aten::mul.Tensor(Tensor self, Tensor other) -> Tensor")) continue;
        replace_node(*graph, mul, "ipex::scale_mul", {mul->input(0), mul->input(1)});
        ++replaced;
    }
    result.count = replaced;
    result.changed = replaced > 0;
    result.details = {{"scale_mul", replaced}};
    return result;
}

}  // namespace ipex::passes
