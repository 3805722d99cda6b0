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
const c10::Symbol kIpexSpatialMean = c10::Symbol::fromQualString("ipex::spatial_mean");

constexpr const char *kMaxPool2dSchema =
    "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, "
    "bool ceil_mode=False) -> Tensor";
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

// Whether `dims` are the last two of a 4-D tensor (2 and 3, either order, negative or not):
// the spatial dims of an image batch.
bool spatial_dims(const std::vector<int64_t> &dims) {
    if (dims.size() != 2) return false;
    auto dim4 = [](int64_t d) { return d < 0 ? d + 4 : d; };
    const int64_t a = dim4(dims[0]), b = dim4(dims[1]);
    return a != b && (a == 2 || a == 3) && (b == 2 || b == 3);
}

// Replaces `node` by ipex::spatial_mean(input, dims, keepdim) (same output).
void insert_spatial_mean(torch::jit::Graph &graph, Node *node, Value *input, const std::vector<int64_t> &dims,
                         bool keepdim) {
    torch::jit::WithInsertPoint guard(node);
    Node *mean = graph.insertNode(
        graph.create(kIpexSpatialMean, {input, graph.insertConstant(dims), graph.insertConstant(keepdim)}, 1));
    mean->output()->setType(node->output()->type());
    mean->copyMetadata(node);
    node->output()->replaceAllUsesWith(mean->output());
    node->destroy();
}

}  // namespace

PassResult replace_pooling(std::shared_ptr<torch::jit::Graph> &graph, bool prepacked) {
    PassResult result;
    int max_pools = 0, global_pools = 0, spatial_means = 0;
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
        ++global_pools;
        if (prepacked) {  // the own kernel's mean (pool_op.h)
            insert_spatial_mean(*graph, pool, pool->input(0), {-1, -2}, true);
            ++spatial_means;
            continue;
        }
        torch::jit::WithInsertPoint guard(pool);
        Value *dims = graph->insertConstant(std::vector<int64_t>{-1, -2});
        Value *keepdim = graph->insertConstant(true);
        Value *dtype = graph->insertConstant(c10::IValue());
        Node *mean = graph->insertNode(graph->create(kMean, {pool->input(0), dims, keepdim, dtype}, 1));
        mean->output()->setType(pool->output()->type());
        mean->copyMetadata(pool);
        pool->output()->replaceAllUsesWith(mean->output());
        pool->destroy();
    }
    // The model's own means over the spatial dims (x.mean([2, 3]), squeeze-excitation blocks).
    for (Node *mean : prepacked ? collect_nodes_of_kind(graph->block(), {kMean}) : std::vector<Node *>{}) {
        if (!mean->matches(kMeanDimSchema) || !is_constant_none(mean->input(3))) continue;
        const auto dims = constant_int_list(mean->input(1));
        const auto keepdim = constant_bool(mean->input(2));
        if (!dims || !keepdim || !spatial_dims(*dims)) continue;
        insert_spatial_mean(*graph, mean, mean->input(0), *dims, *keepdim);
        ++spatial_means;
    }
    // nodes replaced: each global pool once, as aten::mean or as ipex::spatial_mean
    result.count = max_pools + (prepacked ? spatial_means : global_pools);
    result.changed = result.count > 0;
    result.details = {{"max_pool2d", max_pools}, {"global_avg_pool", global_pools}, {"spatial_mean", spatial_means}};
    return result;
}

}  // namespace ipex::passes
