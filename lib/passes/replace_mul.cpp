#include "passes/replace_mul.h"

#include "passes/graph_utils.h"

namespace ipex::passes {

PassResult replace_mul(std::shared_ptr<torch::jit::Graph> &graph) {
    static const c10::Symbol kIpexScaleMul = c10::Symbol::fromQualString("ipex::scale_mul");
    PassResult result;
    int replaced = 0;
    for (torch::jit::Node *mul : collect_nodes_of_kind(graph->block(), {c10::aten::mul})) {
        if (!mul->matches("aten::mul.Tensor(Tensor self, Tensor other) -> Tensor")) continue;
        torch::jit::Node *op = graph->create(kIpexScaleMul, {mul->input(0), mul->input(1)}, 1);
        op->insertBefore(mul);
        op->output()->setType(mul->output()->type());
        copy_origin(op, mul);
        mul->output()->replaceAllUsesWith(op->output());
        mul->destroy();
        ++replaced;
    }
    result.count = replaced;
    result.changed = replaced > 0;
    result.details = {{"scale_mul", replaced}};
    return result;
}

}  // namespace ipex::passes
