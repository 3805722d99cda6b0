#include "passes/replace_pooling.h"

#include <vector>

#include "ops/pool_op.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kMaxPool2d = c10::Symbol::fromQualString("aten::max_pool2d");
const c10::Symbol kAdaptiveAvgPool2d = c10::Symbol::fromQualString("aten::adaptive_avg_pool2d");
const c10::Symbol kIpexMaxPool2d = c10::Symbol::fromQualString("ipex::max_pool2d");
const c10::Symbol kMean = c10::Symbol::fromQualString("aten::mean");
const c10::Symbol kIpexSpatialMean = c10::Symbol::fromQualString("ipex::spatial_mean");

constexpr const char *kAdaptiveAvgPool2dSchema =
    "aten::adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor";
constexpr const char *kMeanDimSchema =
    "aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";

// An output size that makes the adaptive pool a global one: [1, 1] (aten takes no other
// length; Python's adaptive_avg_pool2d(x, 1) reaches the graph as [1, 1]).
bool global_output(const Value *size) {
    const auto v = constant_int_list(size);
    return v && *v == std::vector<int64_t>{1, 1};
}

// Replaces `node` (one output) by KIND(inputs) at the same place, with its type and origin.
void replace_by(torch::jit::Graph &graph, Node *node, c10::Symbol kind, std::vector<Value *> inputs) {
    Node *op = graph.create(kind, inputs, 1);
    op->insertBefore(node);
    op->output()->setType(node->output()->type());
    op->copyMetadata(node);
    node->output()->replaceAllUsesWith(op->output());
    node->destroy();
}

}  // namespace

PassResult replace_pooling(std::shared_ptr<torch::jit::Graph> &graph, bool prepacked) {
    PassResult result;
    int max_pools = 0, global_pools = 0, spatial_means = 0;
    if (prepacked) {
        for (Node *pool : collect_nodes_of_kind(graph->block(), {kMaxPool2d})) {
            if (!pool->matches(kAtenMaxPool2dSchema)) {
                result.skipped.push_back(node_label(pool) + ": unexpected aten::max_pool2d signature");
                continue;
            }
            const auto inputs = pool->inputs();
            replace_by(*graph, pool, kIpexMaxPool2d, {inputs.begin(), inputs.end()});
            ++max_pools;
        }
    }
    for (Node *pool : collect_nodes_of_kind(graph->block(), {kAdaptiveAvgPool2d})) {
        if (!pool->matches(kAdaptiveAvgPool2dSchema) || !global_output(pool->input(1))) continue;
        ++global_pools;
        // The own kernel's mean (pool_op.h) in prepacked mode, aten's otherwise.
        std::vector<Value *> inputs = {pool->input(0)};
        {
            torch::jit::WithInsertPoint guard(pool);  // ends before the pool does
            inputs.push_back(graph->insertConstant(std::vector<int64_t>{-1, -2}));
            inputs.push_back(graph->insertConstant(true));
            if (!prepacked) inputs.push_back(graph->insertConstant(c10::IValue()));  // dtype
        }
        replace_by(*graph, pool, prepacked ? kIpexSpatialMean : kMean, inputs);
        if (prepacked) ++spatial_means;
    }
    // The model's own means over the spatial dims (x.mean([2, 3]), squeeze-excitation blocks).
    for (Node *mean : prepacked ? collect_nodes_of_kind(graph->block(), {kMean}) : std::vector<Node *>{}) {
        if (!mean->matches(kMeanDimSchema) || !is_constant_none(mean->input(3))) continue;
        const auto dims = constant_int_list(mean->input(1));
        const auto keepdim = constant_bool(mean->input(2));
        if (!dims || !keepdim || !ops::spatial_mean_dims(*dims)) continue;
        replace_by(*graph, mean, kIpexSpatialMean, {mean->input(0), mean->input(1), mean->input(2)});
        ++spatial_means;
    }
    // nodes replaced: each global pool once, as aten::mean or as ipex::spatial_mean
    result.count = max_pools + (prepacked ? spatial_means : global_pools);
    result.changed = result.count > 0;
    result.details = {{"max_pool2d", max_pools}, {"global_avg_pool", global_pools}, {"spatial_mean", spatial_means}};
    return result;
}

}  // namespace ipex::passes
