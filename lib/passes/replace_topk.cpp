#include "passes/replace_topk.h"

#include "ir/graph_utils.h"
#include "ops/topk_op.h"

namespace ipex::passes {

PassResult replace_topk(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    static const c10::Symbol kTopk = c10::Symbol::fromQualString(ops::kTopkOp);
    for (torch::jit::Node *node : collect_nodes_of_kind(graph->block(), {c10::aten::topk})) {
        if (!node->matches("aten::topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> "
                           "(Tensor values, Tensor indices)"))
            continue;
        torch::jit::WithInsertPoint guard(node);
        torch::jit::Node *created = graph->insertNode(graph->create(kTopk, node->inputs(), 2));
        copy_origin(created, node);
        for (size_t i = 0; i < 2; ++i) {
            created->output(i)->setType(node->output(i)->type());
            node->output(i)->replaceAllUsesWith(created->output(i));
        }
        node->destroy();
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
