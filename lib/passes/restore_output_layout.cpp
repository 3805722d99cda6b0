#include "passes/restore_output_layout.h"

#include "ops/layout_op.h"
#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Makes `value` contiguous where `consumer` reads it as input `index`; recurses into tuples,
// lists and dicts (their values; the keys stay as they are) built only for this consumer.
int cover(torch::jit::Graph &graph, Node *consumer, size_t index) {
    Value *value = consumer->input(index);
    const Node *producer = value->node();
    const bool dict = producer->kind() == c10::prim::DictConstruct;
    const bool container =
        dict || producer->kind() == c10::prim::TupleConstruct || producer->kind() == c10::prim::ListConstruct;
    if (container && value->uses().size() == 1) {
        int count = 0;  // a dict's inputs alternate key, value
        for (size_t i = dict ? 1 : 0; i < producer->inputs().size(); i += dict ? 2 : 1)
            count += cover(graph, value->node(), i);
        return count;
    }
    if (value->type()->kind() != c10::TypeKind::TensorType) return 0;
    torch::jit::WithInsertPoint guard(consumer);
    static const c10::Symbol kIpexContiguous = c10::Symbol::fromQualString(ops::kContiguousOp);
    Node *contiguous = graph.insertNode(graph.create(kIpexContiguous, {value}));
    contiguous->output()->setType(rank_only_type(value->type()));
    consumer->replaceInput(index, contiguous->output());
    return 1;
}

}  // namespace

PassResult restore_output_layout(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    bool has_conv = false;
    for (const Node *node : collect_nodes(graph->block())) has_conv |= is_prepacked_conv(node);
    if (!has_conv) return result;
    Node *ret = graph->return_node();
    for (size_t i = 0; i < ret->inputs().size(); ++i) result.count += cover(*graph, ret, i);
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
