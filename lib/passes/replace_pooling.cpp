#include "passes/replace_pooling.h"

#include <vector>

#include "passes/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kMaxPool2d = c10::Symbol::fromQualString("aten::max_pool2d");
const c10::Symbol kAdaptiveAvgPool2d = c10::Symbol::fromQualString("aten::adaptive_avg_pool2d");
const c10::Symbol kIpexMaxPool2d = c10::Symbol::fromQualString("ipex::max_pool2d");
const c10::Symbol kMean = c10::Symbol::fromQualString("aten::mean");

constexpr const char *kMaxPool2dSchema =
    "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, "
    "bool ceil_mode=False) -> Tensor";
constexpr const char *kAdaptiveAvgPool2dSchema =
    "aten::adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor";

// An output size that makes the adaptive pool a global one: [1, 1] (aten takes no other
// length; Python's adaptive_avg_pool2d(x, 1) reaches the graph as [1, 1]).
bool global_output(const Value *size) {
    const auto v = constant_int_list(size);
    return v && *v == std::vector<int64_t>{1, 1};
}

}  // namespace

PassResult replace_pooling(std::shared_ptr<torch::jit::Graph> &graph, bool prepacked) {
    PassResult result;
    int max_pools = 0, global_pools = 0;
    if (prepacked) {
        for (Node *pool : collect_nodes_of_kind(graph->block(), {kMaxPool2d})) {
            if (!pool->matches(kMaxPool2dSchema)) {
                result.skipped.push_back(node_label(pool) + ": unexpected aten::max_pool2d signature");
                continue;
            }
            torch::jit::WithInsertPoint guard(pool);
            Node *op = graph->insertNode(graph->create(kIpexMaxPool2d, pool->inputs(), 1));
            op->output()->setType(pool->output()->type());
            op->copyMetadata(pool);
            pool->output()->replaceAllUsesWith(op->output());
            pool->destroy();
            ++max_pools;
        }
    }
    for (Node *pool : collect_nodes_of_kind(graph->block(), {kAdaptiveAvgPool2d})) {
        if (!pool->matches(kAdaptiveAvgPool2dSchema) || !global_output(pool->input(1))) continue;
        torch::jit::WithInsertPoint guard(pool);
        Value *dims = graph->insertConstant(std::vector<int64_t>{-1, -2});
        Value *keepdim = graph->insertConstant(true);
        Value *dtype = graph->insertConstant(c10::IValue());
        Node *mean = graph->insertNode(graph->create(kMean, {pool->input(0), dims, keepdim, dtype}, 1));
        mean->output()->setType(pool->output()->type());
        mean->copyMetadata(pool);
        pool->output()->replaceAllUsesWith(mean->output());
        pool->destroy();
        ++global_pools;
    }
    result.count = max_pools + global_pools;
    result.changed = result.count > 0;
    result.details = {{"max_pool2d", max_pools}, {"global_avg_pool", global_pools}};
    return result;
}

}  // namespace ipex::passes
