#include "passes/fold_conv_bn.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "passes/bn_folding.h"
#include "ir/graph_utils.h"

namespace ipex::passes {

using torch::jit::Node;
using torch::jit::Value;

PassResult fold_conv_bn(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    const auto bns = collect_nodes_of_kind(graph->block(), {c10::Symbol::fromQualString("aten::batch_norm")});
    for (Node *bn : bns) {
        Node *conv = bn->input(0)->node();
        if (!is_aten_conv(conv)) continue;
        const std::string label = node_label(conv) + " -> " + node_label(bn);
        Value *conv_out = conv->output();
        if (is_graph_output(conv_out)) {
            result.skipped.push_back(label + ": conv output is also returned by the graph");
            continue;
        }
        if (!only_shape_queries_besides(conv_out, bn)) {
            result.skipped.push_back(label + ": conv output has other users besides the batch_norm");
            continue;
        }
        std::string why_not;
        const auto affine = read_batch_norm(bn, &why_not);
        if (!affine) {
            result.skipped.push_back(label + ": " + why_not);
            continue;
        }
        const auto params = read_conv_for_folding(conv, &why_not);
        if (!params) {
            result.skipped.push_back(label + ": " + why_not);
            continue;
        }
        if (params->out_channels != affine->channels) {
            result.skipped.push_back(label + ": conv has " + std::to_string(params->out_channels) +
                                     " output channels but batch_norm has " +
                                     std::to_string(affine->channels));
            continue;
        }

        const at::Tensor weight = scale_conv_weight(*params, affine->scale);
        const bool has_bias = params->bias.defined();
        const at::ScalarType bias_dtype = has_bias ? params->bias.scalar_type() : params->weight.scalar_type();
        const at::Tensor old_bias =
            has_bias ? params->bias.to(at::kDouble) : at::zeros({params->out_channels}, at::kDouble);
        const at::Tensor bias = (old_bias * affine->scale + affine->shift).to(bias_dtype);

        Value *weight_value = insert_folded_constant(*graph, weight, conv, "weight");
        Value *bias_value = insert_folded_constant(*graph, bias, conv, "bias");
        conv->replaceInput(*input_index(conv, "weight"), weight_value);
        conv->replaceInput(*input_index(conv, "bias"), bias_value);
        // Labels are read before the batch_norm node is freed.
        result.modules.push_back(node_label(conv));
        result.modules.push_back(node_label(bn));
        bn->output()->replaceAllUsesWith(conv_out);
        bn->destroy();
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
