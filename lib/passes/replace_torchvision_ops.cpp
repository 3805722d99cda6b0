#include "passes/replace_torchvision_ops.h"

#include <algorithm>
#include <string>
#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

constexpr const char *kOps[] = {"roi_align", "nms", "ps_roi_align", "roi_pool"};

// Reads of a tensor that see its strides, not only its values.
bool sees_strides(const Node *node) {
    static const c10::Symbol kinds[] = {c10::aten::view, c10::aten::stride, c10::Symbol::aten("is_contiguous"),
                                        c10::aten::as_strided};
    return std::find(std::begin(kinds), std::end(kinds), node->kind()) != std::end(kinds);
}

// Gives the readers of `value` that see strides a contiguous copy of it.
void contiguous_for_stride_readers(torch::jit::Graph &graph, Value *value) {
    std::vector<torch::jit::Use> readers;
    for (const auto &use : value->uses())
        if (sees_strides(use.user)) readers.push_back(use);
    if (readers.empty()) return;
    torch::jit::WithInsertPoint guard(value->node()->next());
    Value *copy = graph.insert(c10::aten::contiguous, {value});
    copy->setType(value->type());
    for (const auto &use : readers) use.user->replaceInput(use.offset, copy);
}

}  // namespace

PassResult replace_torchvision_ops(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    std::vector<c10::Symbol> kinds;
    for (const char *op : kOps) kinds.push_back(c10::Symbol::fromQualString(std::string("torchvision::") + op));
    for (Node *node : collect_nodes_of_kind(graph->block(), kinds)) {
        const std::string name = node->kind().toUnqualString();
        Node *twin =
            graph->create(c10::Symbol::fromQualString("ipex::" + name), node->inputs(), node->outputs().size());
        twin->insertBefore(node);
        copy_origin(twin, node);
        for (size_t i = 0; i < node->outputs().size(); ++i) {
            twin->output(i)->setType(node->output(i)->type());
            node->output(i)->replaceAllUsesWith(twin->output(i));
        }
        if (name == "roi_align") contiguous_for_stride_readers(*graph, twin->output());
        result.modules.push_back(node_label(node));
        node->destroy();
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
