#include "quant/int8_grouping.h"

#include <torch/csrc/jit/ir/constants.h>

#include <cmath>
#include <string>

#include "ir/graph_utils.h"
#include "passes/group_convolutions.h"
#include "passes/prepacked_nodes.h"
#include "ops/int8/int8_context.h"

namespace ipex::quant {
namespace {

using torch::jit::Node;

// An int8 convolution (ipex::int8_op or int8_op_sum) with a constant context, but a depthwise one.
bool is_member(const Node *node) {
    const std::string kind = node->kind().toQualString();
    if (kind != "ipex::int8_op" && kind != "ipex::int8_op_sum") return false;
    const auto ctx = torch::jit::toIValue(node->inputs().back());
    if (!ctx || !ctx->isCustomClass()) return false;
    const auto context = ctx->toCustomClass<Int8Context>();
    const Int8Params &p = context->params();
    return p.kind.rfind("conv", 0) == 0 && (p.groups == 1 || context->weight_sizes()[1] != 1);
}

bool has_summand(const Node *node) { return node->kind().toQualString() == std::string("ipex::int8_op_sum"); }

// An int8 2-D convolution (ipex::int8_op: no sum) with a constant context.
bool is_int8_conv2d(const Node *node) {
    const auto ctx = torch::jit::toIValue(node->inputs().back());
    return ctx && ctx->isCustomClass() && ctx->toCustomClass<Int8Context>()->params().kind == "conv2d";
}

// The fp32 value `quantized` was made from where ipex::quantize_per_tensor made it for `reader`
// alone, with the input parameters reader's context was built for; else null.
torch::jit::Value *float_source(torch::jit::Value *quantized, const Int8Params &p) {
    const Node *q = quantized->node();
    if (q->kind().toQualString() != std::string("ipex::quantize_per_tensor") || quantized->uses().size() != 1)
        return nullptr;
    const auto scale = torch::jit::toIValue(q->input(1)), zero_point = torch::jit::toIValue(q->input(2)),
               dtype = torch::jit::toIValue(q->input(3));
    if (!scale || !scale->isDouble() || !zero_point || !zero_point->isInt() || !dtype || !dtype->isInt())
        return nullptr;
    const bool same = std::abs(scale->toDouble() - p.in_scale) <= 1e-6 * p.in_scale &&
                      zero_point->toInt() == p.in_zero_point && dtype->toInt() == static_cast<int64_t>(p.in_dtype);
    return same ? q->input(0) : nullptr;
}

}  // namespace

passes::PassResult pool_int8_convolutions(std::shared_ptr<torch::jit::Graph> &graph) {
    passes::PassResult result;
    int quantizes = 0;
    static const std::vector<c10::Symbol> kinds = {c10::Symbol::fromQualString("ipex::int8_op")};
    for (Node *conv : passes::collect_nodes_of_kind(graph->block(), kinds)) {
        Node *pool = nullptr;
        if (!is_int8_conv2d(conv) || !passes::pool_after(conv, "ipex::int8_max_pool2d", &pool)) continue;
        // The quantize of an fp32 input made for this convolution alone goes into the op.
        const Int8Params &params = torch::jit::toIValue(conv->inputs().back())->toCustomClass<Int8Context>()->params();
        torch::jit::Value *from_float = float_source(conv->input(0), params);
        Node *quantize = from_float ? conv->input(0)->node() : nullptr;
        std::vector<torch::jit::Value *> inputs{from_float ? from_float : conv->input(0), conv->inputs().back()};
        for (size_t i = 1; i < 6; ++i) inputs.push_back(pool->input(i));
        const std::string label = passes::node_label(conv) + "+" + passes::node_label(pool);
        Node *op = passes::replace_node(*graph, pool, "ipex::int8_conv_max_pool", inputs);
        passes::copy_origin(op, conv);
        conv->destroy();
        if (quantize) {
            quantize->destroy();
            ++quantizes;
        }
        result.modules.push_back(label);
        ++result.count;
    }
    result.details = {{"fp32_inputs", quantizes}};
    result.changed = result.count > 0;
    return result;
}

passes::PassResult dequantize_edges(std::shared_ptr<torch::jit::Graph> &graph) {
    passes::PassResult result;
    static const std::vector<c10::Symbol> kinds = {c10::Symbol::aten("dequantize")};
    for (Node *node : passes::collect_nodes_of_kind(graph->block(), kinds)) {
        // aten::dequantize.tensors (a list) stays.
        if (node->inputs().size() != 1 || !node->input(0)->type()->cast<c10::TensorType>()) continue;
        passes::replace_node(*graph, node, "ipex::dequantize", {node->input(0)});
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

passes::PassResult group_int8_convolutions(std::shared_ptr<torch::jit::Graph> &graph) {
    static const passes::GroupFamily int8{is_member, has_summand, "ipex::int8_graph"};
    return passes::group_runs(graph, int8);
}

}  // namespace ipex::quant
