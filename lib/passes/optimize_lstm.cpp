#include "passes/optimize_lstm.h"

#include <ATen/ATen.h>

#include "ops/ops.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Sizes of the trial run that checks oneDNN has the primitive before the graph changes.
constexpr int64_t kTrialSteps = 2;
constexpr int64_t kTrialBatch = 1;

// The tensors of a Tensor[] input: a list constant (scripted modules' _flat_weights after
// freezing) or a prim::ListConstruct of tensor constants (traced modules).
std::optional<std::vector<at::Tensor>> constant_tensor_list(const Value *value) {
    if (const auto ival = torch::jit::toIValue(value); ival && ival->isTensorList())
        return ival->toTensorVector();
    if (value->node()->kind() != torch::jit::prim::ListConstruct) return std::nullopt;
    std::vector<at::Tensor> tensors;
    for (const Value *item : value->node()->inputs()) {
        const auto t = constant_tensor(item);
        if (!t) return std::nullopt;
        tensors.push_back(*t);
    }
    return tensors;
}

// The context for an aten::lstm/gru node, or nullopt with `why` set.
c10::intrusive_ptr<ops::RnnContext> prepack_rnn(const Node *node, const std::string &dtype, std::string *why) {
    const bool lstm = node->kind() == c10::Symbol::fromQualString("aten::lstm");
    const auto *schema = node->maybeSchema();
    if (!schema || schema->overload_name() != "input") {
        *why = schema && schema->overload_name() == "data" ? "packed sequence input (PackedSequence)"
                                                           : "not the tensor-input overload";
        return {};
    }
    const auto weights = constant_tensor_list(input_named(node, "params"));
    if (!weights) {
        *why = "weights are not constants (freeze the model)";
        return {};
    }
    const auto has_biases = constant_bool(input_named(node, "has_biases"));
    const auto num_layers = constant_int(input_named(node, "num_layers"));
    const auto dropout = constant_double(input_named(node, "dropout"));
    const auto train = constant_bool(input_named(node, "train"));
    const auto bidirectional = constant_bool(input_named(node, "bidirectional"));
    const auto batch_first = constant_bool(input_named(node, "batch_first"));
    if (!has_biases || !num_layers || !dropout || !train || !bidirectional || !batch_first) {
        *why = "a flag (biases, layers, dropout, train, bidirectional, batch_first) is not a constant";
        return {};
    }
    if (*train && *dropout > 0) {
        *why = "dropout in training mode";
        return {};
    }
    const int64_t cells = *num_layers * (*bidirectional ? 2 : 1);
    const int64_t per_cell = *has_biases ? 4 : 2;
    if (lstm && cells > 0 && static_cast<int64_t>(weights->size()) == cells * (per_cell + 1)) {
        *why = "proj_size: the LSTM has a projection";
        return {};
    }
    if (cells <= 0 || static_cast<int64_t>(weights->size()) != cells * per_cell || (*weights)[1].dim() != 2 ||
        (*weights)[0].dim() != 2) {
        *why = "unexpected weight list of " + std::to_string(weights->size()) + " tensors";
        return {};
    }
    ops::RnnParams params{lstm ? "lstm" : "gru", (*weights)[0].size(1), (*weights)[1].size(1), *num_layers,
                          *bidirectional, *batch_first, *has_biases};
    const std::string math = dtype == "bf16" ? "bf16" : "fp32";
    try {
        auto ctx = c10::make_intrusive<ops::RnnContext>(params, *weights, math);
        // A throwaway copy runs once, so a primitive oneDNN lacks is found now and the real
        // context caches only the shapes the model is fed.
        ops::RnnContext trial(params, *weights, math);
        c10::InferenceMode guard;
        const int64_t steps = params.batch_first ? kTrialBatch : kTrialSteps;
        const int64_t batch = params.batch_first ? kTrialSteps : kTrialBatch;
        trial.run(at::zeros({steps, batch, params.input_size}), at::Tensor(), at::Tensor());
        return ctx;
    } catch (const c10::Error &e) {
        *why = e.what_without_backtrace();
        return {};
    }
}

}  // namespace

PassResult optimize_lstm(std::shared_ptr<torch::jit::Graph> &graph, const std::string &dtype) {
    PassResult result;
    const std::vector<c10::Symbol> kinds = {c10::Symbol::fromQualString("aten::lstm"),
                                            c10::Symbol::fromQualString("aten::gru")};
    for (Node *node : collect_nodes_of_kind(graph->block(), kinds)) {
        const std::string label = node_label(node);
        const std::string kind = node->kind().toQualString();
        std::string why;
        const auto ctx = prepack_rnn(node, dtype, &why);
        if (!ctx) {
            result.skipped.push_back(label + ": " + kind + " kept (" + why + ")");
            continue;
        }
        Value *constant = insert_constant_at_top(*graph, c10::IValue(ctx), node);
        const bool lstm = ctx->is_lstm();
        torch::jit::WithInsertPoint guard(node);
        Node *op = graph->insertNode(graph->create(c10::Symbol::fromQualString(lstm ? ops::kLstm : ops::kGru),
                                                   {node->input(0), node->input(1), constant}, node->outputs().size()));
        copy_origin(op, node);
        for (size_t i = 0; i < node->outputs().size(); ++i) {
            op->output(i)->setType(rank_only_type(node->output(i)->type()));
            node->output(i)->replaceAllUsesWith(op->output(i));
        }
        node->destroy();
        result.modules.push_back(label);
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
