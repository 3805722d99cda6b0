#include "passes/pipeline.h"

#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/shape_analysis.h>
#include <torch/csrc/jit/passes/symbolic_shape_analysis.h>

#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <set>

#include "base/errors.h"
#include "core/run_errors.h"
#include "base/log.h"
#include "ir/forward_arguments.h"
#include "ops/ops.h"
#include "passes/cast_to_lowp.h"
#include "passes/chain_bf32_outputs.h"
#include "passes/concat_linear.h"
#include "passes/decompose_transformer_layer.h"
#include "passes/replace_matmul.h"
#include "passes/fold_conv_bn.h"
#include "passes/fold_conv_frozen_bn.h"
#include "passes/fold_linear_bn.h"
#include "passes/fuse_conv_sum.h"
#include "passes/fuse_attention.h"
#include "passes/fuse_eltwise.h"
#include "passes/fuse_layer_norm.h"
#include "passes/fuse_interaction.h"
#include "passes/merge_embedding_bags.h"
#include "passes/fuse_norm_relu.h"
#include "passes/replace_mul.h"
#include "passes/replace_topk.h"
#include "passes/replace_pooling.h"
#include "passes/replace_torchvision_ops.h"
#include "passes/split_cat_conv.h"
#include "passes/fuse_linear_binary.h"
#include "passes/optimize_lstm.h"
#include "passes/prepack_weights.h"
#include "passes/remove_dropout.h"
#include "passes/contiguous_before_view.h"
#include "passes/fuse_channel_shuffle.h"
#include "passes/chain_convolutions.h"
#include "passes/group_convolutions.h"
#include "passes/replace_woq_linear.h"
#include "passes/restore_output_layout.h"
#include "passes/to_channels_last.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;
using Clock = std::chrono::steady_clock;

// Alternating calls of each way per convolution kernel choice at optimize time.
constexpr int kConvKernelRuns = 5;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

nlohmann::json pass_entry(const std::string &name, const std::string &status) {
    return {{"name", name}, {"status", status}, {"changed", false}, {"count", 0},
            {"modules", nlohmann::json::array()}, {"skipped", nlohmann::json::array()}};
}

nlohmann::json applied_entry(const std::string &name, const PassResult &r, double ms) {
    nlohmann::json j = r.to_json();
    j["name"] = name;
    j["status"] = "applied";
    j["ms"] = ms;
    return j;
}

// --dtype bf16 on a CPU where oneDNN has no bf16 convolution or matmul (no AVX-512): linears are
// widened (ops/linear_context.h: fp32 matmuls on bf16-rounded values, fp32 speed), convolutions
// and RNNs stay aten ops, which libtorch runs here on reference code, tens of times slower than
// fp32. A model may be optimized here for another CPU, so this warns and goes on.
void warn_without_onednn_bf16(const OptimizeOptions &options, bool prepacked,
                              const std::function<void(const std::string &)> &warn) {
    if (!prepacked || options.dtype != "bf16" || ops::dtype_supported("bf16", nullptr)) return;
    warn("--dtype bf16: oneDNN has no bf16 convolution or matmul on this CPU (it needs AVX-512; fast with "
         "AVX512-BF16 or AMX): linears run as fp32 matmuls on bf16-rounded values (the bf16 results at fp32 "
         "speed), convolutions and RNNs stay libtorch bf16 ops, which run on reference code here, tens of times "
         "slower than --dtype fp32; the model is written for CPUs that have them and runs their bf16 kernels "
         "there (the report's weights_prepack 'skipped' lists each layer left)");
}

// Errors out early when libtorch (portable) or oneDNN (prepacked) has no kernel for the
// requested low-precision dtype.
void check_dtype_supported(const std::string &dtype, bool prepacked) {
    if (dtype != "fp16") return;
    std::string why;
    if (prepacked && !ops::dtype_supported(dtype, &why))
        throw_unsupported("--dtype fp16: this CPU has no oneDNN fp16 convolution/linear (it needs AVX512-FP16 or "
                          "AMX-FP16): " + why + "; use --dtype bf16");
    try {
        const auto opts = at::TensorOptions().dtype(at::kHalf);
        at::linear(at::ones({2, 4}, opts), at::ones({3, 4}, opts));
        at::conv2d(at::ones({1, 2, 4, 4}, opts), at::ones({2, 2, 3, 3}, opts));
    } catch (const c10::Error &e) {
        throw_unsupported("--dtype fp16: libtorch " + std::string(TORCH_VERSION) +
                          " has no fp16 linear/convolution kernel on this CPU (" +
                          readable_error(e) + "); use --dtype bf16");
    }
}

// Gives graph inputs the concrete types of the sample inputs so passes can see ranks.
// Trailing arguments with defaults may be left out; they keep their declared types (a model
// called later with a mask must still take it).
void specialize_inputs(GraphPtr graph, const c10::FunctionSchema &schema, const std::vector<c10::IValue> &inputs) {
    const size_t n_args = graph->inputs().size() - 1;  // input 0 is self
    size_t required = n_args;
    while (required > 0 && required < schema.arguments().size() && schema.arguments()[required].default_value())
        --required;
    if (inputs.size() < required || inputs.size() > n_args)
        throw_usage("--sample-input gives " + std::to_string(inputs.size()) + " inputs but forward takes " +
                    (required == n_args ? std::to_string(n_args)
                                        : std::to_string(required) + " to " + std::to_string(n_args) + " (the last " +
                                              std::to_string(n_args - required) + " have defaults)"));
    for (size_t i = 0; i < inputs.size(); ++i) {
        auto *value = graph->inputs()[i + 1];
        if (inputs[i].isTensor() && value->type()->cast<c10::TensorType>())
            value->setType(c10::TensorType::create(inputs[i].toTensor()));
    }
    // Shape propagation is best-effort: passes fall back to their rank-agnostic forms.
    // The symbolic pass covers more ops; the legacy one fills in what it leaves.
    try {
        torch::jit::PropagateShapesOnGraph(graph);
    } catch (const std::exception &) {
    }
    try {
        torch::jit::PropagateInputShapes(graph);
    } catch (const std::exception &) {
    }
    torch::jit::ConstantPropagation(graph);
}

// Methods of the top-level module that forward calls (directly or through each other).
// They are inlined into forward when freezing and need not be kept.
std::set<std::string> methods_called_by_forward(const torch::jit::Module &module) {
    std::set<std::string> seen{"forward"};
    std::vector<std::string> todo{"forward"};
    while (!todo.empty()) {
        const auto graph = module.get_method(todo.back()).graph();
        todo.pop_back();
        std::vector<const torch::jit::Block *> blocks{graph->block()};
        while (!blocks.empty()) {
            const auto *block = blocks.back();
            blocks.pop_back();
            for (const auto *node : block->nodes()) {
                for (const auto *sub : node->blocks()) blocks.push_back(sub);
                if (node->kind() == torch::jit::prim::CallMethod && node->input(0) == graph->inputs()[0]) {
                    const std::string name = node->s(torch::jit::attr::name);
                    if (seen.insert(name).second) todo.push_back(name);
                }
            }
        }
    }
    return seen;
}

void cleanup(const GraphPtr &graph) {
    torch::jit::EliminateDeadCode(graph);
    torch::jit::EliminateCommonSubexpression(graph);
    torch::jit::ConstantPooling(graph);
}

// What the passes of one optimize run share.
struct Run {
    const OptimizeOptions &options;
    bool prepacked;                      // the prepacked oneDNN ops are on
    std::string fp32_math;               // what prepacking runs: bf32 only where oneDNN has it
    GraphPtr graph;
    nlohmann::json passes = nlohmann::json::array();  // the report's entries, in order
    std::vector<PassOutcome> outcomes;   // the same, typed
    std::string prepacked_fp32_math = "fp32";  // set by weights_prepack
    nlohmann::json entry_fields;         // set by a pass: more fields of its own entry
    PassResult selection;                // auto kernel selection so far (the linears' choices)
    std::optional<size_t> selection_at;  // its entry, finished after the sample input's run
    std::optional<woq::WoqReplaceReport> woq;
    std::function<void(const std::string &)> warn;

    bool knob(const char *flag) const { return knob_enabled(*find_knob(flag), options); }

    void disabled(const std::string &name) {
        passes.push_back(pass_entry(name, "disabled"));
        outcomes.push_back({name, false, 0});
    }
    void applied(const std::string &name, const PassResult &r, double ms) {
        passes.push_back(applied_entry(name, r, ms));
        outcomes.push_back({name, true, r.count});
    }
};

// What a pass needs besides its knob.
enum class Needs {
    nothing,
    prepacked,           // the prepacked oneDNN ops (libipex_ops.so): off with --portable or --no-weights-prepack
    lowp,                // --dtype bf16 or fp16
    lowp_or_prepacked,   // either (or OptimizeOptions::decompose_transformer_layers)
    bf32,                // prepacking ran fp32 convolutions and linears in bf32
    woq,                 // OptimizeOptions::woq
    pooling,             // OptimizeOptions::replace_pooling
};

// When the graph is cleaned up (dead code, common subexpressions, constants) after a pass.
enum class Cleanup { if_changed, always, never };

// One pass: its report name, the knob that switches it (nullptr: none), what else it needs,
// the pass itself, the cleanup after it, whether it repeats with its fixed-point neighbours
// (consecutive fixed-point passes run as a group until none changes the graph), and the
// warning when its knob was asked for on the command line but what it needs is off.
struct Pass {
    const char *name;
    const char *knob;
    Needs needs;
    PassResult (*run)(Run &);
    Cleanup cleanup = Cleanup::if_changed;
    bool fixed_point = false;
    const char *unmet_warning = nullptr;
};

PassResult run_replace_woq_linear(Run &run) {
    run.woq = woq::replace_woq_linear(run.graph, *run.options.woq);
    for (const auto &m : run.woq->missing) run.warn("no checkpoint layer for Linear '" + m + "'; kept as it is");
    for (const auto &m : run.woq->mismatched) run.warn("shape mismatch, kept as it is: " + m);
    for (const auto &m : run.woq->unused) run.warn("checkpoint layer '" + m + "' matches no Linear of the model");
    return run.woq->pass;
}

PassResult run_cast_to_lowp(Run &run) {
    const at::ScalarType lowp = run.options.dtype == "bf16" ? at::kBFloat16 : at::kHalf;
    return cast_to_lowp(run.graph, lowp, run.options.keep_dtype);
}

PassResult run_weights_prepack(Run &run) {
    PrepackOptions prepack;
    prepack.fp32_math = run.fp32_math;
    prepack.auto_kernel_selection = run.knob("auto-kernel-selection");
    PassResult r = prepack_weights(run.graph, prepack);
    // Linears prepacking could not take (weights computed at run time) still leave aten.
    const PassResult left = remaining_linears_to_matmul(run.graph);
    if (left.changed) {
        r.details["non_constant_weights_to_ipex_matmul"] = left.count;
        r.changed = true;
    }
    run.entry_fields["fp32_math_mode"] = run.fp32_math;  // what ran: strict fp32 where bf32 cannot
    run.prepacked_fp32_math = run.fp32_math;
    // The linears' choices are made here, the convolutions' after the sample input's run.
    if (r.details.contains("kernel_choices")) {
        run.selection.details["kernel_choices"] = r.details["kernel_choices"];
        run.selection.count = static_cast<int>(r.details["kernel_choices"].size());
    }
    return r;
}

PassResult run_auto_kernel_selection(Run &run) {
    run.selection_at = run.passes.size();  // the entry keeps its place; finished at the end
    return run.selection;
}

// The pass list: the order passes run in, and the one place each is switched.
const std::vector<Pass> &pass_list() {
    static const std::vector<Pass> list = {
        {"replace_woq_linear", nullptr, Needs::woq, run_replace_woq_linear},
        // The fused encoder-layer op hides its linears from the dtype cast and prepacking;
        // stock fp32 runs it well, so it is split up only when one of those follows.
        {"decompose_transformer_layer", nullptr, Needs::lowp_or_prepacked,
         [](Run &run) { return decompose_transformer_layer(run.graph); }},
        {"remove_dropout", "replace-dropout", Needs::nothing, [](Run &run) { return remove_dropout(run.graph); }},
        {"fold_conv_bn", "conv-bn-folding", Needs::nothing, [](Run &run) { return fold_conv_bn(run.graph); }},
        {"fold_conv_frozen_bn", "conv-bn-folding", Needs::nothing, [](Run &run) { return fold_conv_frozen_bn(run.graph); }},
        {"fold_linear_bn", "linear-bn-folding", Needs::nothing, [](Run &run) { return fold_linear_bn(run.graph); }},
        {"concat_linear", "concat-linear", Needs::nothing, [](Run &run) { return concat_linear(run.graph); }},
        {"to_channels_last", "channels-last", Needs::nothing, [](Run &run) { return to_channels_last(run.graph); }},
        {"fuse_attention", "fuse-attention", Needs::prepacked, [](Run &run) { return fuse_attention(run.graph); },
         Cleanup::if_changed, false,
         "--fuse-attention needs the prepacked oneDNN ops (--weights-prepack: on at O1, off with --portable); "
         "attention kept as aten ops"},
        // Before the dtype cast, so a bf16 model's layer norms are not cast to fp32 and back.
        {"split_cat_conv", nullptr, Needs::prepacked, [](Run &run) { return split_cat_conv(run.graph); }},
        {"fuse_layer_norm", nullptr, Needs::prepacked, [](Run &run) { return fuse_layer_norm(run.graph); }},
        // Before the dtype cast, which runs ipex::roi_align (not torchvision's) in bf16.
        {"replace_torchvision_ops", nullptr, Needs::prepacked, [](Run &run) { return replace_torchvision_ops(run.graph); }},
        {"cast_to_lowp", nullptr, Needs::lowp, run_cast_to_lowp, Cleanup::always},
        // After the dtype cast: with --dtype bf16 the merged op stores fp32 tables in bf16.
        {"merge_embedding_bags", nullptr, Needs::prepacked,
         [](Run &run) {
             return merge_embedding_bags(run.graph, {run.options.dtype == "bf16", run.knob("embedding-int8")});
         }},
        {"fuse_interaction", nullptr, Needs::prepacked, [](Run &run) { return fuse_interaction(run.graph); }},
        // After the dtype cast: a bf16 model runs its LSTM/GRU in bf16.
        {"optimize_lstm", "optimize-lstm", Needs::prepacked,
         [](Run &run) { return optimize_lstm(run.graph, run.options.dtype); }, Cleanup::if_changed, false,
         "--optimize-lstm needs the prepacked oneDNN ops (--weights-prepack: on at O1, off with --portable); "
         "aten::lstm/gru kept"},
        {"replace_matmul", nullptr, Needs::prepacked, [](Run &run) { return replace_matmul(run.graph); }},
        {"weights_prepack", "weights-prepack", Needs::prepacked, run_weights_prepack, Cleanup::always},
        {"auto_kernel_selection", "auto-kernel-selection", Needs::prepacked, run_auto_kernel_selection,
         Cleanup::never, false,
         "--auto-kernel-selection chooses between prepacked oneDNN ops and other kernels; without prepacking it "
         "does nothing"},
        {"fuse_eltwise", nullptr, Needs::prepacked, [](Run &run) { return fuse_eltwise(run.graph); },
         Cleanup::always, true},
        {"fuse_conv_sum", nullptr, Needs::prepacked, [](Run &run) { return fuse_conv_sum(run.graph); },
         Cleanup::always, true},
        {"fuse_linear_binary", nullptr, Needs::prepacked, [](Run &run) { return fuse_linear_binary(run.graph); },
         Cleanup::always, true},
        {"chain_bf32_outputs", nullptr, Needs::bf32, [](Run &run) { return chain_bf32_outputs(run.graph); },
         Cleanup::always},
        {"restore_output_layout", nullptr, Needs::prepacked, [](Run &run) { return restore_output_layout(run.graph); },
         Cleanup::never},
        {"replace_pooling", nullptr, Needs::pooling,
         [](Run &run) { return replace_pooling(run.graph, run.prepacked); }},
        {"fuse_norm_relu", nullptr, Needs::prepacked, [](Run &run) { return fuse_norm_relu(run.graph); }},
        {"fuse_channel_shuffle", nullptr, Needs::prepacked, [](Run &run) { return fuse_channel_shuffle(run.graph); }},
        {"replace_mul", nullptr, Needs::prepacked, [](Run &run) { return replace_mul(run.graph); }},
        {"replace_topk", nullptr, Needs::prepacked, [](Run &run) { return replace_topk(run.graph); }},
        {"group_convolutions", "conv-chains", Needs::prepacked,
         [](Run &run) { return group_convolutions(run.graph); }},
        {"chain_convolutions", "conv-chains", Needs::prepacked,
         [](Run &run) { return chain_convolutions(run.graph); }, Cleanup::if_changed, false,
         "--conv-chains needs the prepacked ops: it is off with --portable or --no-weights-prepack"},
        {"contiguous_before_view", nullptr, Needs::nothing, [](Run &run) { return contiguous_before_view(run.graph); }},
    };
    return list;
}

bool needs_met(Needs needs, const Run &run) {
    const OptimizeOptions &o = run.options;
    switch (needs) {
    case Needs::nothing: return true;
    case Needs::prepacked: return run.prepacked;
    case Needs::lowp: return o.dtype != "fp32";
    case Needs::lowp_or_prepacked: return run.prepacked || o.dtype != "fp32" || o.decompose_transformer_layers;
    case Needs::bf32: return run.prepacked && run.fp32_math == "bf32";
    case Needs::woq: return o.woq.has_value();
    case Needs::pooling: return o.replace_pooling;
    }
    return false;
}

// Whether the pass runs; warns when its knob was asked for but what it needs is off.
bool pass_enabled(const Pass &pass, Run &run) {
    if (pass.knob && !run.knob(pass.knob)) return false;
    if (needs_met(pass.needs, run)) return true;
    if (pass.knob && pass.unmet_warning && run.options.knob_overrides.count(pass.knob)) run.warn(pass.unmet_warning);
    return false;
}

// Runs the passes [first, last) of the list (one pass, or a fixed-point group) and appends
// their entries, each timed over the group and its cleanup.
void run_passes(const Pass *first, const Pass *last, Run &run) {
    const auto start = Clock::now();
    std::vector<PassResult> results(last - first);
    bool changed_any = false;
    for (bool again = true; again;) {
        again = false;
        for (const Pass *p = first; p != last; ++p) {
            const PassResult step = p->run(run);
            results[p - first].merge(step);
            changed_any |= step.changed;
            again |= p->fixed_point && step.changed;
        }
    }
    if (first->cleanup == Cleanup::always || (first->cleanup == Cleanup::if_changed && changed_any)) cleanup(run.graph);
    const double ms = ms_since(start);
    for (const Pass *p = first; p != last; ++p) {
        PassResult &r = results[p - first];
        if (p->fixed_point) {  // a round sees each kept op once: list it once
            std::sort(r.skipped.begin(), r.skipped.end());
            r.skipped.erase(std::unique(r.skipped.begin(), r.skipped.end()), r.skipped.end());
        }
        run.applied(p->name, r, ms);
        if (!run.entry_fields.is_null()) run.passes.back().update(run.entry_fields);
        run.entry_fields = nullptr;
    }
}

// Warnings and choices made once, before the passes: what prepacking can run here.
void prepare_run(Run &run) {
    const OptimizeOptions &o = run.options;
    run.fp32_math = o.fp32_math_mode;
    if (!run.prepacked && o.knob_overrides.count("embedding-int8") && o.knob_overrides.at("embedding-int8"))
        run.warn("--embedding-int8 needs the merged EmbeddingBag op (libipex_ops.so: off with --portable or "
                 "--no-weights-prepack); tables kept as they are");
    if (!run.prepacked) {
        if (o.fp32_math_mode == "bf32")
            run.warn("--fp32-math-mode bf32 needs the prepacked oneDNN ops (off with --portable or --no-weights-prepack); "
                     "strict fp32 kept");
        return;
    }
    if (run.knob("auto-kernel-selection") && o.sample_inputs.empty())
        run.warn("--auto-kernel-selection without --sample-input times each linear at " +
                 std::to_string(ops::LinearContext::kDefaultRows) +
                 " row(s) and records no convolution kernel choice (timed on each shape's first call at run time)");
    if (run.fp32_math == "bf32" && !ops::dtype_supported("bf32", nullptr)) {
        // bf32 allows bf16 products; strict fp32 is the more exact choice where there are none.
        run.warn("--fp32-math-mode bf32: oneDNN has no bf32 convolution or linear on this CPU (it needs AVX-512); "
                 "strict fp32 prepacked instead");
        run.fp32_math = "fp32";
    }
}

}  // namespace

bool knob_enabled(const Knob &knob, const OptimizeOptions &options) {
    if (auto it = options.knob_overrides.find(knob.flag); it != options.knob_overrides.end())
        return it->second;
    return options.level == "O1" && knob.on_at_o1;
}

std::vector<std::string> pass_names() {
    std::vector<std::string> names{"freeze"};
    for (const Pass &p : pass_list()) names.push_back(p.name);
    return names;
}

OptimizeResult optimize_module(const torch::jit::Module &input, const OptimizeOptions &options) {
    for (const auto &[flag, on] : options.knob_overrides)
        TORCH_INTERNAL_ASSERT(find_knob(flag), "unknown knob ", flag);
    OptimizeResult result;
    const bool prepacked = !options.portable && knob_enabled(*find_knob("weights-prepack"), options);
    Run run{options, prepacked};
    run.warn = [&](const std::string &msg) {
        log::warn(msg);
        result.warnings.push_back(msg);
    };
    result.prepacked = prepacked;
    result.report["mode"] = prepacked ? "prepacked" : "portable";
    if (options.portable && options.knob_overrides.count("weights-prepack") && options.knob_overrides.at("weights-prepack"))
        throw_usage("--weights-prepack and --portable contradict each other: a portable model holds no prepacked ops");

    // O0 writes the model unchanged unless an explicit flag asks for something.
    bool any_requested = options.dtype != "fp32" || options.woq.has_value();
    for (const Knob &k : kKnobs) any_requested |= knob_enabled(k, options);
    if (options.level == "O0" && !any_requested) {
        result.module = input.clone();
        for (const std::string &name : pass_names()) run.disabled(name);
        result.passes = std::move(run.outcomes);
        result.report["passes"] = run.passes;
        result.report["warnings"] = result.warnings;
        return result;
    }
    check_dtype_supported(options.dtype, prepacked);
    warn_without_onednn_bf16(options, prepacked, run.warn);

    torch::jit::Module model = input.clone();
    if (model.hasattr("training") && model.is_training()) {
        run.warn("the model was saved in training mode; switched to eval for inference");
    }
    model.eval();

    auto start = Clock::now();
    // Other entry points (e.g. @torch.jit.export methods) are kept, frozen but not optimized;
    // Python protocol methods (__len__, __getitem__ of containers) are dropped, as
    // torch.jit.freeze does.
    std::vector<std::string> preserved;
    const std::set<std::string> called = methods_called_by_forward(model);
    for (const auto &m : model.get_methods())
        if (!called.count(m.name()) && m.name().rfind("__", 0) != 0) preserved.push_back(m.name());
    if (!preserved.empty()) {
        std::string names;
        for (const auto &n : preserved) names += (names.empty() ? "" : ", ") + n;
        run.warn("methods other than forward are kept as they are (frozen, not optimized): " + names);
    }
    try {
        result.module = torch::jit::freeze_module(model, preserved);
    } catch (const c10::Error &e) {
        throw_unsupported("freezing failed: " + readable_error(e) +
                          " (a model that mutates its attributes in forward cannot be frozen)");
    }
    PassResult frozen;
    frozen.changed = true;
    frozen.count = 1;
    run.applied("freeze", frozen, ms_since(start));

    const torch::jit::Method forward = result.module.get_method("forward");
    run.graph = forward.graph();
    // A detector's image tensors are its one List[Tensor] argument.
    const std::vector<c10::IValue> sample_args = ir::forward_arguments(result.module, options.sample_inputs);
    if (!sample_args.empty()) specialize_inputs(run.graph, forward.function().getSchema(), sample_args);

    prepare_run(run);
    const std::vector<Pass> &list = pass_list();
    for (size_t i = 0; i < list.size();) {
        size_t end = i + 1;
        while (list[i].fixed_point && end < list.size() && list[end].fixed_point) ++end;
        if (pass_enabled(list[i], run)) {
            run_passes(&list[i], &list[end], run);
        } else {
            for (size_t j = i; j < end; ++j) run.disabled(list[j].name);
        }
        i = end;
    }
    torch::jit::EraseShapeInformation(run.graph);

    // The check run of the sample input also shows auto kernel selection the convolutions'
    // input shapes (they run oneDNN's way meanwhile).
    std::optional<ops::KernelShapeLog> shapes;
    if (run.selection_at && !options.sample_inputs.empty()) shapes.emplace();
    if (!options.sample_inputs.empty()) {
        std::vector<c10::IValue> args = sample_args;
        try {
            c10::InferenceMode guard;
            result.module.forward(args);
        } catch (const std::exception &e) {
            rethrow_run_error(e, "the optimized model fails on --sample-input: ",
                              "; try --level O0 or switch off the pass named above with --no-KNOB",
                              ExitCode::unsupported);
        }
    }
    if (run.selection_at) {
        const auto select_start = Clock::now();
        const ops::KernelShapeLog *log = shapes ? &*shapes : nullptr;
        run.selection.merge(choose_conv_kernels(run.graph, log, kConvKernelRuns));
        run.passes[*run.selection_at] = applied_entry("auto_kernel_selection", run.selection, ms_since(select_start));
        run.outcomes[*run.selection_at].count = run.selection.count;
    }
    result.woq = std::move(run.woq);
    result.passes = std::move(run.outcomes);
    result.fp32_math_mode = run.prepacked_fp32_math;
    result.report["passes"] = run.passes;
    result.report["warnings"] = result.warnings;
    return result;
}

}  // namespace ipex::passes
