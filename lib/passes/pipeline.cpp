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
#include "ops/ops.h"
#include "passes/cast_to_lowp.h"
#include "passes/chain_bf32_outputs.h"
#include "passes/concat_linear.h"
#include "passes/decompose_transformer_layer.h"
#include "passes/replace_matmul.h"
#include "passes/fold_conv_bn.h"
#include "passes/fold_linear_bn.h"
#include "passes/fuse_conv_sum.h"
#include "passes/fuse_attention.h"
#include "passes/fuse_eltwise.h"
#include "passes/fuse_layer_norm.h"
#include "passes/fuse_norm_relu.h"
#include "passes/replace_mul.h"
#include "passes/replace_pooling.h"
#include "passes/split_cat_conv.h"
#include "passes/fuse_linear_binary.h"
#include "passes/optimize_lstm.h"
#include "passes/prepack_weights.h"
#include "passes/remove_dropout.h"
#include "passes/contiguous_before_view.h"
#include "passes/fuse_channel_shuffle.h"
#include "passes/chain_convolutions.h"
#include "passes/group_convolutions.h"
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

const Knob *find_knob(const std::string &flag) {
    for (const auto &k : knobs())
        if (flag == k.flag) return &k;
    return nullptr;
}

// --dtype bf16 on a CPU where oneDNN has no bf16 convolution or linear (no AVX-512): those
// layers stay aten ops, which libtorch runs here on reference code, tens of times slower than
// fp32. A model may be optimized here for another CPU, so this warns and goes on.
void warn_without_onednn_bf16(const OptimizeOptions &options, bool prepacked,
                              const std::function<void(const std::string &)> &warn) {
    if (!prepacked || options.dtype != "bf16" || ops::dtype_supported("bf16", nullptr)) return;
    warn("--dtype bf16: oneDNN has no bf16 convolution or linear on this CPU (it needs AVX-512; fast with "
         "AVX512-BF16 or AMX), so those layers stay libtorch bf16 ops, which run on reference code here, tens of "
         "times slower than --dtype fp32; the model is written for CPUs that have them (the report's "
         "weights_prepack 'skipped' lists each layer)");
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

// Runs `pass` on the graph and cleans the graph up if the pass changed it; appends the pass's
// "applied" entry, timed over both, to `passes`.
void run_timed(const std::string &name, GraphPtr &graph, nlohmann::json &passes,
               const std::function<PassResult(GraphPtr &)> &pass) {
    const auto start = Clock::now();
    const PassResult r = pass(graph);
    if (r.changed) cleanup(graph);
    passes.push_back(applied_entry(name, r, ms_since(start)));
}

// The auto_kernel_selection entry of the report (at `at` in the pass list) and what it has
// chosen so far; the convolutions choose after a run of the sample input.
struct Selection {
    size_t at;
    PassResult result;
};

// prepack_weights, then the fusions to a fixed point, then the output layout; report entries
// for each (disabled when prepacking is off). With auto kernel selection, its entry to finish.
std::optional<Selection> run_prepacking(GraphPtr &graph, const OptimizeOptions &options, bool prepacked,
                                        nlohmann::json &passes, const std::function<void(const std::string &)> &warn) {
    const bool auto_select = knob_enabled(*find_knob("auto-kernel-selection"), options);
    const char *const fusions[] = {"fuse_eltwise", "fuse_conv_sum", "fuse_linear_binary"};
    if (!prepacked) {
        passes.push_back(pass_entry("replace_matmul", "disabled"));
        passes.push_back(pass_entry("weights_prepack", "disabled"));
        passes.push_back(pass_entry("auto_kernel_selection", "disabled"));
        for (const char *name : fusions) passes.push_back(pass_entry(name, "disabled"));
        passes.push_back(pass_entry("chain_bf32_outputs", "disabled"));
        passes.push_back(pass_entry("restore_output_layout", "disabled"));
        if (options.fp32_math_mode == "bf32")
            warn("--fp32-math-mode bf32 needs the prepacked oneDNN ops (off with --portable or --no-weights-prepack); "
                 "strict fp32 kept");
        if (auto_select && options.knob_overrides.count("auto-kernel-selection"))
            warn("--auto-kernel-selection chooses between prepacked oneDNN ops and other kernels; without "
                 "prepacking it does nothing");
        return std::nullopt;
    }
    if (auto_select && options.sample_inputs.empty())
        warn("--auto-kernel-selection without --sample-input times each linear at " +
             std::to_string(ops::LinearContext::kDefaultRows) +
             " row(s) and records no convolution kernel choice (timed on each shape's first call at run time)");
    PrepackOptions prepack_options;
    prepack_options.fp32_math = options.fp32_math_mode;
    if (prepack_options.fp32_math == "bf32" && !ops::dtype_supported("bf32", nullptr)) {
        // bf32 allows bf16 products; strict fp32 is the more exact choice where there are none.
        warn("--fp32-math-mode bf32: oneDNN has no bf32 convolution or linear on this CPU (it needs AVX-512); "
             "strict fp32 prepacked instead");
        prepack_options.fp32_math = "fp32";
    }
    prepack_options.auto_kernel_selection = auto_select;
    run_timed("replace_matmul", graph, passes, replace_matmul);
    auto start = Clock::now();
    PassResult r = prepack_weights(graph, prepack_options);
    // Linears prepacking could not take (weights computed at run time) still leave aten.
    const PassResult left = remaining_linears_to_matmul(graph);
    if (left.changed) {
        r.details["non_constant_weights_to_ipex_matmul"] = left.count;
        r.changed = true;
    }
    cleanup(graph);
    nlohmann::json entry = applied_entry("weights_prepack", r, ms_since(start));
    entry["fp32_math_mode"] = prepack_options.fp32_math;  // what ran: strict fp32 where bf32 cannot
    passes.push_back(entry);
    // The linears' choices are made by prepacking; the convolutions' once their post-ops are
    // fused (below). The entry keeps its place in the pass list.
    PassResult selection;
    if (r.details.contains("kernel_choices")) {
        selection.details["kernel_choices"] = r.details["kernel_choices"];
        selection.count = static_cast<int>(r.details["kernel_choices"].size());
    }
    const size_t selection_at = passes.size();
    passes.push_back(pass_entry("auto_kernel_selection", "disabled"));

    std::map<std::string, PassResult> fused;
    start = Clock::now();
    for (bool changed = true; changed;) {
        changed = false;
        PassResult step = fuse_eltwise(graph);
        changed |= step.changed;
        fused["fuse_eltwise"].merge(step);
        step = fuse_conv_sum(graph);
        changed |= step.changed;
        fused["fuse_conv_sum"].merge(step);
        step = fuse_linear_binary(graph);
        changed |= step.changed;
        fused["fuse_linear_binary"].merge(step);
    }
    cleanup(graph);
    for (const char *name : fusions) {
        auto &skipped = fused[name].skipped;  // the fixed-point loop sees a kept op once per round
        std::sort(skipped.begin(), skipped.end());
        skipped.erase(std::unique(skipped.begin(), skipped.end()), skipped.end());
        passes.push_back(applied_entry(name, fused[name], ms_since(start)));
    }
    start = Clock::now();
    r = chain_bf32_outputs(graph);
    cleanup(graph);
    // Applied when prepacking ran bf32, not when it was only asked for (fp32 where oneDNN has none).
    const bool bf32_ran = prepack_options.fp32_math == "bf32";
    passes.push_back(r.count || bf32_ran ? applied_entry("chain_bf32_outputs", r, ms_since(start))
                                         : pass_entry("chain_bf32_outputs", "disabled"));
    start = Clock::now();
    r = restore_output_layout(graph);
    passes.push_back(applied_entry("restore_output_layout", r, ms_since(start)));
    if (auto_select) return Selection{selection_at, selection};
    return std::nullopt;
}

// optimize_lstm after the dtype cast (a bf16 model runs its LSTM/GRU in bf16); it needs the
// prepacked ops, so it is off when they are.
void run_optimize_lstm(GraphPtr &graph, const OptimizeOptions &options, bool prepacked, nlohmann::json &passes,
                       const std::function<void(const std::string &)> &warn) {
    const Knob &knob = *find_knob("optimize-lstm");
    if (!knob_enabled(knob, options) || !prepacked) {
        passes.push_back(pass_entry(knob.pass, "disabled"));
        if (knob_enabled(knob, options) && options.knob_overrides.count(knob.flag))
            warn("--optimize-lstm needs the prepacked oneDNN ops (--weights-prepack: on at O1, off with --portable); "
                 "aten::lstm/gru kept");
        return;
    }
    run_timed(knob.pass, graph, passes, [&](GraphPtr &g) { return optimize_lstm(g, options.dtype); });
}

}  // namespace

const std::vector<Knob> &knobs() {
    static const std::vector<Knob> table = {
        {"replace-dropout", "remove_dropout", true, true,
         "remove dropout (every variant; inference only)"},
        {"conv-bn-folding", "fold_conv_bn", true, true,
         "fold BatchNorm into the preceding conv/conv-transpose"},
        {"linear-bn-folding", "fold_linear_bn", true, true,
         "fold BatchNorm1d into the preceding Linear"},
        {"concat-linear", "concat_linear", true, true,
         "merge Linears that share an input into one Linear and a split"},
        {"channels-last", "to_channels_last", true, true,
         "channels-last weights (and entry) for 2-D convolutions"},
        {"fuse-attention", "fuse_attention", true, true,
         "replace attention written out as matmul, scale, mask, softmax and matmul by one blocked attention op "
         "(needs libipex_ops.so; off with --portable or --no-weights-prepack)"},
        {"weights-prepack", "weights_prepack", true, true,
         "run conv/linear as oneDNN ops with weights prepacked once and elementwise neighbours fused "
         "(needs libipex_ops.so to run; --portable turns it off)"},
        {"optimize-lstm", "optimize_lstm", true, true,
         "run LSTM/GRU layers as oneDNN RNN ops with weights prepacked once (needs libipex_ops.so; off with "
         "--portable or --no-weights-prepack; proj_size, packed sequences and training dropout stay aten)"},
        {"conv-chains", "chain_convolutions", true, true,
         "run each convolution that alone reads the one before it (a 1x1 expansion and its depthwise layer), "
         "a max pooling that alone reads a convolution (a stem), and residual blocks of convolutions (a ResNet "
         "stage), in one op, a few images at a time when their activations outgrow the cache (needs "
         "libipex_ops.so; off with --portable or --no-weights-prepack)"},
        {"auto-kernel-selection", "auto_kernel_selection", false, true,
         "for fp32 linears, time the oneDNN op against aten::linear at the --sample-input shape and keep the "
         "faster; for convolutions with an own kernel beside oneDNN's (depthwise, 1x1, grouped, or ending in "
         "sigmoid/SiLU), time both at the shapes the sample input gives them and save the faster in the model"},
    };
    return table;
}

bool knob_enabled(const Knob &knob, const OptimizeOptions &options) {
    if (auto it = options.knob_overrides.find(knob.flag); it != options.knob_overrides.end())
        return it->second;
    return options.level == "O1" && knob.on_at_o1;
}

OptimizeResult optimize_module(const torch::jit::Module &input, const OptimizeOptions &options) {
    for (const auto &[flag, on] : options.knob_overrides)
        TORCH_INTERNAL_ASSERT(find_knob(flag), "unknown knob ", flag);
    OptimizeResult result;
    nlohmann::json passes = nlohmann::json::array();
    auto warn = [&](const std::string &msg) {
        log::warn(msg);
        result.warnings.push_back(msg);
    };
    const Knob &prepack_knob = *find_knob("weights-prepack");
    const bool prepacked = !options.portable && knob_enabled(prepack_knob, options);
    result.report["mode"] = prepacked ? "prepacked" : "portable";
    if (options.portable && options.knob_overrides.count("weights-prepack") && options.knob_overrides.at("weights-prepack"))
        throw_usage("--weights-prepack and --portable contradict each other: a portable model holds no prepacked ops");

    // O0 writes the model unchanged unless an explicit flag asks for something.
    bool any_requested = options.dtype != "fp32" || !options.early_passes.empty();
    for (const auto &k : knobs()) any_requested |= k.available && knob_enabled(k, options);
    if (options.level == "O0" && !any_requested) {
        result.module = input.clone();
        passes.push_back(pass_entry("freeze", "disabled"));
        for (const auto &k : knobs()) {
            const bool on = knob_enabled(k, options);
            passes.push_back(pass_entry(k.pass, on && !k.available ? "not_available" : "disabled"));
            if (on && !k.available)
                warn(std::string("--") + k.flag + " is not available in this version; the model is written unchanged");
        }
        for (const char *name :
             {"decompose_transformer_layer", "split_cat_conv", "fuse_layer_norm", "cast_to_lowp", "replace_matmul",
              "fuse_eltwise", "fuse_conv_sum", "fuse_linear_binary", "chain_bf32_outputs", "restore_output_layout",
              "replace_pooling", "fuse_norm_relu", "fuse_channel_shuffle", "replace_mul", "group_convolutions",
              "chain_convolutions",
              "contiguous_before_view"})
            passes.push_back(pass_entry(name, "disabled"));
        result.report["passes"] = passes;
        result.report["warnings"] = result.warnings;
        return result;
    }
    check_dtype_supported(options.dtype, prepacked);
    warn_without_onednn_bf16(options, prepacked, warn);

    torch::jit::Module model = input.clone();
    if (model.hasattr("training") && model.is_training()) {
        warn("the model was saved in training mode; switched to eval for inference");
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
        warn("methods other than forward are kept as they are (frozen, not optimized): " + names);
    }
    try {
        result.module = torch::jit::freeze_module(model, preserved);
    } catch (const c10::Error &e) {
        throw_unsupported("freezing failed: " + readable_error(e) +
                          " (a model that mutates its attributes in forward cannot be frozen)");
    }
    passes.push_back({{"name", "freeze"}, {"status", "applied"}, {"changed", true}, {"count", 1},
                      {"modules", nlohmann::json::array()}, {"skipped", nlohmann::json::array()},
                      {"ms", ms_since(start)}});

    const torch::jit::Method forward = result.module.get_method("forward");
    GraphPtr graph = forward.graph();
    if (!options.sample_inputs.empty()) specialize_inputs(graph, forward.function().getSchema(), options.sample_inputs);

    for (const auto &early : options.early_passes) run_timed(early.name, graph, passes, early.run);

    // The fused encoder-layer op hides its linears from the dtype cast and prepacking; stock
    // fp32 runs it well, so it is split up only when one of those follows.
    if (prepacked || options.dtype != "fp32") {
        run_timed("decompose_transformer_layer", graph, passes, decompose_transformer_layer);
    } else {
        passes.push_back(pass_entry("decompose_transformer_layer", "disabled"));
    }

    const at::ScalarType lowp = options.dtype == "bf16" ? at::kBFloat16 : at::kHalf;
    const std::map<std::string, std::function<PassResult(GraphPtr &)>> runners = {
        {"remove_dropout", [](GraphPtr &g) { return remove_dropout(g); }},
        {"fold_conv_bn", [](GraphPtr &g) { return fold_conv_bn(g); }},
        {"fold_linear_bn", [](GraphPtr &g) { return fold_linear_bn(g); }},
        {"concat_linear", [](GraphPtr &g) { return concat_linear(g); }},
        {"to_channels_last", [](GraphPtr &g) { return to_channels_last(g); }},
        {"fuse_attention", [](GraphPtr &g) { return fuse_attention(g); }},
    };
    for (const auto &k : knobs()) {
        const bool on = knob_enabled(k, options);
        if (!runners.count(k.pass) && k.available) continue;  // prepacking runs after the dtype cast
        if (!k.available) {
            passes.push_back(pass_entry(k.pass, "not_available"));
            if (options.knob_overrides.count(k.flag) && on)
                warn(std::string("--") + k.flag + " is not available in this version; the model is optimized without it");
            continue;
        }
        if (on && !prepacked && std::string(k.pass) == "fuse_attention") {
            passes.push_back(pass_entry(k.pass, "disabled"));
            if (options.knob_overrides.count(k.flag))
                warn("--fuse-attention needs the prepacked oneDNN ops (--weights-prepack: on at O1, off with "
                     "--portable); attention kept as aten ops");
            continue;
        }
        if (!on) {
            passes.push_back(pass_entry(k.pass, "disabled"));
            continue;
        }
        run_timed(k.pass, graph, passes, runners.at(k.pass));
    }

    // Before the dtype cast, so a bf16 model's layer norms are not cast to fp32 and back.
    if (prepacked) {
        run_timed("split_cat_conv", graph, passes, split_cat_conv);
        run_timed("fuse_layer_norm", graph, passes, fuse_layer_norm);
    } else {
        passes.push_back(pass_entry("split_cat_conv", "disabled"));
        passes.push_back(pass_entry("fuse_layer_norm", "disabled"));
    }

    if (options.dtype == "fp32") {
        passes.push_back(pass_entry("cast_to_lowp", "disabled"));
    } else {
        start = Clock::now();
        const PassResult r = cast_to_lowp(graph, lowp, options.keep_dtype);
        cleanup(graph);
        passes.push_back(applied_entry("cast_to_lowp", r, ms_since(start)));
    }
    run_optimize_lstm(graph, options, prepacked, passes, warn);
    std::optional<Selection> selection = run_prepacking(graph, options, prepacked, passes, warn);
    if (options.replace_pooling) {
        run_timed("replace_pooling", graph, passes, [&](GraphPtr &g) { return replace_pooling(g, prepacked); });
    } else {
        passes.push_back(pass_entry("replace_pooling", "disabled"));
    }
    if (prepacked) {
        run_timed("fuse_norm_relu", graph, passes, fuse_norm_relu);
        run_timed("fuse_channel_shuffle", graph, passes, fuse_channel_shuffle);
        run_timed("replace_mul", graph, passes, replace_mul);
    } else {
        passes.push_back(pass_entry("fuse_norm_relu", "disabled"));
        passes.push_back(pass_entry("fuse_channel_shuffle", "disabled"));
        passes.push_back(pass_entry("replace_mul", "disabled"));
    }
    const Knob &chains = *find_knob("conv-chains");
    if (prepacked && knob_enabled(chains, options)) {
        run_timed("group_convolutions", graph, passes, group_convolutions);
        run_timed(chains.pass, graph, passes, chain_convolutions);
    } else {
        passes.push_back(pass_entry("group_convolutions", "disabled"));
        passes.push_back(pass_entry(chains.pass, "disabled"));
        if (!prepacked && knob_enabled(chains, options) && options.knob_overrides.count(chains.flag))
            warn(std::string("--") + chains.flag + " needs the prepacked ops: it is off with --portable or "
                 "--no-weights-prepack");
    }
    run_timed("contiguous_before_view", graph, passes, contiguous_before_view);
    torch::jit::EraseShapeInformation(graph);

    // The check run of the sample input also shows auto kernel selection the convolutions'
    // input shapes (they run oneDNN's way meanwhile).
    std::optional<ops::KernelShapeLog> shapes;
    if (selection && !options.sample_inputs.empty()) shapes.emplace();
    if (!options.sample_inputs.empty()) {
        std::vector<c10::IValue> args = options.sample_inputs;
        try {
            c10::InferenceMode guard;
            result.module.forward(args);
        } catch (const std::exception &e) {
            rethrow_run_error(e, "the optimized model fails on --sample-input: ",
                              "; try --level O0 or switch off the pass named above with --no-KNOB",
                              ExitCode::unsupported);
        }
    }
    if (selection) {
        const auto start = Clock::now();
        const ops::KernelShapeLog *log = shapes ? &*shapes : nullptr;
        selection->result.merge(choose_conv_kernels(graph, log, kConvKernelRuns));
        passes[selection->at] = applied_entry("auto_kernel_selection", selection->result, ms_since(start));
    }
    result.report["passes"] = passes;
    result.report["warnings"] = result.warnings;
    return result;
}

}  // namespace ipex::passes
