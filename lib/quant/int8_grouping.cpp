#include "quant/int8_grouping.h"

#include <torch/csrc/jit/ir/constants.h>

#include <string>

#include "passes/group_convolutions.h"
#include "quant/int8_context.h"

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

}  // namespace

passes::PassResult group_int8_convolutions(std::shared_ptr<torch::jit::Graph> &graph) {
    static const passes::GroupFamily int8{is_member, has_summand, "ipex::int8_graph"};
    return passes::group_runs(graph, int8);
}

}  // namespace ipex::quant
