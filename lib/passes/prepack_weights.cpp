#include "passes/prepack_weights.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "core/tensor_spec.h"
#include "ops/ops.h"
#include "passes/chain_convolutions.h"
#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Timing of one candidate kernel at optimize time (auto kernel selection).
constexpr int kSelectionWarmup = 3;
constexpr int kSelectionRuns = 15;

// The aten convolutions and linear, the ops whose constant weights are prepacked.
const std::vector<c10::Symbol> &prepacked_kinds() {
    static const std::vector<c10::Symbol> kinds = [] {
        std::vector<c10::Symbol> k = aten_conv_kinds();
        k.push_back(c10::aten::linear);
        return k;
    }();
    return kinds;
}

std::string kind_of(const Node *node) { return node->kind().toQualString(); }

std::optional<std::string> compute_dtype(at::ScalarType weight, const PrepackOptions &options) {
    switch (weight) {
        case at::kFloat: return options.fp32_math;
        case at::kBFloat16: return std::string("bf16");
        case at::kHalf: return std::string("fp16");
        default: return std::nullopt;
    }
}

// Concrete input sizes when shape specialization found them.
std::vector<int64_t> known_sizes(const Value *value) {
    const auto type = value->type()->cast<c10::TensorType>();
    if (!type) return {};
    const auto sizes = type->sizes().concrete_sizes();
    return sizes ? *sizes : std::vector<int64_t>{};
}

// An int list argument; single values are repeated over the spatial dims as aten does.
std::optional<std::vector<int64_t>> int_list(const Node *node, const char *name, size_t spatial) {
    const Value *value = input_named(node, name);
    if (!value) return std::nullopt;
    auto list = constant_int_list(value);
    if (!list) {
        if (auto single = constant_int(value)) list = std::vector<int64_t>{*single};
        else return std::nullopt;
    }
    if (list->size() == 1 && spatial > 1) list->assign(spatial, list->front());
    if (list->size() != spatial) return std::nullopt;
    return list;
}

// Padding given as "valid" or "same" (conv*d.padding overloads), as symmetric int padding.
std::optional<std::vector<int64_t>> string_padding(const Value *value, const at::Tensor &weight,
                                                   const std::vector<int64_t> &dilation, std::string *why) {
    const auto ival = torch::jit::toIValue(value);
    if (!ival || !ival->isString()) return std::nullopt;
    const std::string mode = ival->toStringRef();
    const size_t spatial = static_cast<size_t>(weight.dim() - 2);
    if (mode == "valid") return std::vector<int64_t>(spatial, 0);
    std::vector<int64_t> padding;
    for (size_t d = 0; d < spatial; ++d) {
        const int64_t total = dilation[d] * (weight.size(d + 2) - 1);
        if (total % 2 != 0) {
            *why = "padding='same' is asymmetric for this kernel";
            return std::nullopt;
        }
        padding.push_back(total / 2);
    }
    return padding;
}

// Drops dtype casts and layout copies whose only user is the prepacked op (it converts once).
Value *skip_entry_copies(Value *x, at::ScalarType compute) {
    static const auto to = c10::Symbol::fromQualString("aten::to");
    static const auto contiguous = c10::Symbol::fromQualString("aten::contiguous");
    while (x->uses().size() == 1) {
        const Node *producer = x->node();
        if (producer->kind() == contiguous && producer->inputs().size() == 2) {
            x = producer->input(0);
            continue;
        }
        // aten::to.dtype(self, dtype, non_blocking, copy, memory_format)
        const auto dtype = producer->kind() == to && producer->inputs().size() == 5
                               ? constant_int(input_named(producer, "dtype"))
                               : std::nullopt;
        if (dtype && static_cast<at::ScalarType>(*dtype) == compute) {
            x = producer->input(0);
            continue;
        }
        break;
    }
    return x;
}

double median_ms(const std::function<void()> &fn) {
    for (int i = 0; i < kSelectionWarmup; ++i) fn();
    std::vector<double> times;
    for (int i = 0; i < kSelectionRuns; ++i) {
        const auto start = std::chrono::steady_clock::now();
        fn();
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    return times[times.size() / 2];
}

// The constant bias (or none) and the context dtype for a conv/linear node, or nullopt with
// `why` set.
std::optional<std::string> bias_and_dtype(const Node *node, const at::Tensor &weight, const PrepackOptions &options,
                                          c10::optional<at::Tensor> *bias, std::string *why) {
    const Value *bias_value = input_named(node, "bias");
    const auto bias_constant = bias_value ? constant_tensor(bias_value) : std::nullopt;
    if (bias_value && !bias_constant && !is_constant_none(bias_value)) {
        *why = "bias is not a constant";
        return std::nullopt;
    }
    if (bias_constant) *bias = *bias_constant;
    const auto dtype = compute_dtype(weight.scalar_type(), options);
    if (!dtype) *why = std::string("weight dtype ") + c10::toString(weight.scalar_type()) + " has no prepacked kernel";
    return dtype;
}

struct Replacement {
    c10::IValue context;
    Value *input = nullptr;
    const char *op = nullptr;
    at::ScalarType compute = at::kFloat;
};

// Builds the conv context, or says why not.
std::optional<Replacement> prepack_conv(Node *node, const PrepackOptions &options, std::string *why) {
    const auto weight = constant_tensor(input_named(node, "weight"));
    if (!weight) {
        *why = "weight is not a constant (freeze the model)";
        return std::nullopt;
    }
    if (weight->dim() < 3 || weight->dim() > 5) {
        *why = "weight of rank " + std::to_string(weight->dim()) + " is not 3-D to 5-D";
        return std::nullopt;
    }
    c10::optional<at::Tensor> bias;
    const auto dtype = bias_and_dtype(node, *weight, options, &bias, why);
    if (!dtype) return std::nullopt;
    const std::string kind = kind_of(node);
    bool transposed = kind.find("conv_transpose") != std::string::npos;
    if (Value *t = input_named(node, "transposed")) {
        const auto flag = constant_bool(t);
        if (!flag) {
            *why = "transposed flag is not a constant";
            return std::nullopt;
        }
        transposed = *flag;
    }
    const size_t spatial = static_cast<size_t>(weight->dim() - 2);
    const auto stride = int_list(node, "stride", spatial);
    const auto dilation = int_list(node, "dilation", spatial);
    const auto groups = constant_int(input_named(node, "groups"));
    if (!stride || !dilation || !groups) {
        *why = "stride, dilation or groups is not a constant of the weight's rank";
        return std::nullopt;
    }
    auto padding = int_list(node, "padding", spatial);
    if (!padding) padding = string_padding(input_named(node, "padding"), *weight, *dilation, why);
    if (!padding) {
        if (why->empty()) *why = "padding is not a constant of the weight's rank";
        return std::nullopt;
    }
    std::vector<int64_t> output_padding(spatial, 0);
    if (transposed && input_named(node, "output_padding")) {
        const auto op = int_list(node, "output_padding", spatial);
        if (!op) {
            *why = "output_padding is not a constant";
            return std::nullopt;
        }
        output_padding = *op;
    }
    Value *input = node->input(0);
    std::vector<int64_t> hint = known_sizes(input);
    if (hint.size() != spatial + 2) hint.clear();
    const at::ScalarType compute = ops::compute_scalar_type(*dtype);
    try {
        ops::ConvParams params{*stride, *padding, *dilation, output_padding, *groups, transposed};
        auto ctx = c10::make_intrusive<ops::ConvolutionContext>(*weight, bias, params, *dtype, ops::PostOps{}, false,
                                                                hint);
        return Replacement{c10::IValue(ctx), skip_entry_copies(input, compute), ops::kConvolution, compute};
    } catch (const c10::Error &e) {
        *why = e.what_without_backtrace();
        return std::nullopt;
    }
}

std::optional<Replacement> prepack_linear(Node *node, const PrepackOptions &options, nlohmann::json &choices,
                                          std::string *why) {
    const auto weight = constant_tensor(input_named(node, "weight"));
    if (!weight || weight->dim() != 2) {
        *why = "weight is not a constant 2-D tensor (freeze the model)";
        return std::nullopt;
    }
    c10::optional<at::Tensor> bias;
    const auto dtype = bias_and_dtype(node, *weight, options, &bias, why);
    if (!dtype) return std::nullopt;
    Value *input = node->input(0);
    const std::vector<int64_t> sizes = known_sizes(input);
    int64_t rows = 0;
    if (!sizes.empty()) {
        rows = 1;
        for (size_t i = 0; i + 1 < sizes.size(); ++i) rows *= sizes[i];
    }
    c10::intrusive_ptr<ops::LinearContext> ctx;
    try {
        ctx = c10::make_intrusive<ops::LinearContext>(*weight, bias, *dtype, ops::PostOps{}, rows);
    } catch (const c10::Error &e) {
        *why = e.what_without_backtrace();
        return std::nullopt;
    }
    if (options.auto_kernel_selection && *dtype == "fp32") {
        const int64_t m = rows > 0 ? rows : ops::LinearContext::kDefaultRows;
        const at::Tensor x = at::randn({m, weight->size(1)});
        const at::Tensor b = bias ? *bias : at::Tensor();
        c10::InferenceMode guard;
        const double onednn = median_ms([&] { ctx->run(x, c10::nullopt); });
        const double aten = median_ms([&] { at::linear(x, *weight, b); });
        const bool keep_aten = aten < onednn;
        choices.push_back({{"module", node_label(node)},
                           {"shape", std::to_string(m) + "x" + std::to_string(weight->size(1)) + "->" +
                                         std::to_string(weight->size(0))},
                           {"rows_from", rows > 0 ? "sample input" : "default"},
                           {"onednn_ms", onednn},
                           {"aten_ms", aten},
                           {"choice", keep_aten ? "aten" : "onednn"}});
        if (keep_aten) {
            *why = "aten::linear is faster for this shape (auto kernel selection)";
            return std::nullopt;
        }
    }
    const at::ScalarType compute = ops::compute_scalar_type(*dtype);
    return Replacement{c10::IValue(ctx), skip_entry_copies(input, compute), ops::kLinear, compute};
}

// Times the own kernel of one convolution against oneDNN at every input shape the sample run
// gave it, records the faster for each and adds a row per shape to `choices`; false when the
// context has no kernel choice or was not run.
bool choose_kernels_of(ops::ConvolutionContext &ctx, const std::string &label, const ops::KernelShapeLog *log,
                       int runs, PassResult &result, nlohmann::json &choices) {
    if (!ctx.has_kernel_choice()) return false;
    const auto shapes = log ? log->shapes_of(&ctx) : std::vector<std::vector<int64_t>>{};
    if (shapes.empty()) {
        result.skipped.push_back(label + (log ? ": not run by the sample input" : ": no --sample-input") +
                                 " (chosen by timing on each input shape's first call)");
        return false;
    }
    const char *kernel = ctx.has_depthwise_kernel()   ? "own depthwise convolution"
                         : ctx.has_pointwise_kernel() ? "own pointwise convolution"
                         : ctx.has_grouped_kernel()   ? "own grouped convolution"
                         : ctx.has_winograd_kernel()  ? "oneDNN Winograd convolution"
                                                      : "oneDNN convolution, own activation after it";
    for (const auto &shape : shapes) {
        const auto chosen = ctx.choose_kernel(shape, runs);
        choices.push_back({{"module", label},
                           {"conv", ctx.describe()},
                           {"input", format_sizes(shape)},
                           {"kernel", kernel},
                           {"own_ms", chosen.own_ms},
                           {"onednn_ms", chosen.onednn_ms},
                           {"choice", chosen.own ? "own" : "onednn"}});
        ++result.count;
    }
    return true;
}

}  // namespace

PassResult prepack_weights(std::shared_ptr<torch::jit::Graph> &graph, const PrepackOptions &options) {
    PassResult result;
    nlohmann::json choices = nlohmann::json::array();
    static const auto linear = c10::Symbol::fromQualString("aten::linear");
    for (Node *node : collect_nodes_of_kind(graph->block(), prepacked_kinds())) {
        const std::string label = node_label(node);
        if (node->outputs().size() != 1) continue;
        std::string why;
        const auto replacement = node->kind() == linear ? prepack_linear(node, options, choices, &why)
                                                        : prepack_conv(node, options, &why);
        if (!replacement) {
            result.skipped.push_back(label + ": " + kind_of(node) + " kept (" + why + ")");
            continue;
        }
        Value *ctx = insert_constant_at_top(*graph, replacement->context, node);
        const c10::TypePtr type = rank_only_type(node->output()->type());
        Node *op = replace_node(*graph, node, replacement->op, {replacement->input, ctx});
        op->output()->setType(type);
        result.modules.push_back(label);
        ++result.count;
    }
    if (!choices.empty()) result.details["kernel_choices"] = choices;
    result.changed = result.count > 0;
    return result;
}

PassResult choose_conv_kernels(std::shared_ptr<torch::jit::Graph> &graph, const ops::KernelShapeLog *log, int runs) {
    PassResult result;
    nlohmann::json choices = nlohmann::json::array();
    static const c10::Symbol chain_kind = c10::Symbol::fromQualString(ops::kConvolutionChain);
    static const c10::Symbol pool_kind = c10::Symbol::fromQualString(ops::kConvolutionMaxPool);
    static const c10::Symbol graph_kind = c10::Symbol::fromQualString(ops::kConvolutionGraph);
    static const std::vector<c10::Symbol> kinds = {
        c10::Symbol::fromQualString(ops::kConvolution), c10::Symbol::fromQualString(ops::kConvolutionSum),
        c10::Symbol::fromQualString(ops::kConvolutionSumInPlace), chain_kind, pool_kind, graph_kind};
    c10::InferenceMode guard;
    for (Node *node : collect_nodes_of_kind(graph->block(), kinds)) {
        const bool listed = node->kind() == chain_kind || node->kind() == pool_kind || node->kind() == graph_kind;
        const auto contexts = listed ? chain_contexts(node)
                                                         : std::vector<c10::intrusive_ptr<ops::ConvolutionContext>>{
                                                               conv_context(node)};
        bool chosen_any = false;
        for (size_t k = 0; k < contexts.size(); ++k) {
            // A chain's convolutions are told apart by their place in it.
            const std::string label =
                node_label(node) + (contexts.size() > 1 ? " (chain " + std::to_string(k + 1) + ")" : "");
            chosen_any |= choose_kernels_of(*contexts[k], label, log, runs, result, choices);
        }
        if (chosen_any) result.modules.push_back(node_label(node));
    }
    if (!choices.empty()) result.details["conv_kernel_choices"] = choices;
    return result;
}

}  // namespace ipex::passes
