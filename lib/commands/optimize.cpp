#include "commands/optimize.h"

#include <chrono>
#include <memory>

#include "base/atomic_file.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "checkpoint/import_checkpoint.h"
#include "core/tensor_spec.h"
#include "ir/graph_utils.h"
#include "model/inspect.h"
#include "model/load.h"
#include "passes/pipeline.h"
#include "passes/replace_woq_linear.h"
#include "quant/ipex_summary.h"
#include "quant/qconfig.h"
#include "quant/quantize.h"

namespace ipex::commands {
namespace {

// The weight-only pass's checkpoint (which its options point to) and where its layers came from.
struct WoqRun {
    woq::WoqCheckpoint checkpoint;
    woq::WoqReplaceOptions options;
    nlohmann::json source;
};

// Checks the weight-only options, reads the checkpoint (exit 3 on bad files) and sets the
// replace_woq_linear pass's options; nullptr without weight-only quantization. The run and
// `model` (the input) must outlive the optimize run.
std::unique_ptr<WoqRun> prepare_woq(const OptimizeRequest &r, passes::OptimizeOptions &options,
                                    const torch::jit::Module &model) {
    r.check_woq();
    if (r.low_precision_checkpoint.empty() && r.woq.dtype.empty()) return nullptr;
    auto run = std::make_unique<WoqRun>();
    run->options.lowp_mode = resolve_lowp_mode(r.woq.lowp_mode, r.dtype, LowpAuto::bf16_model_or_cpu);
    run->options.allow_partial = r.allow_partial;
    run->options.module = &model;
    if (!r.low_precision_checkpoint.empty()) {
        woq::ImportResult imported = woq::load_low_precision_checkpoint(r.low_precision_checkpoint);
        run->checkpoint = std::move(imported.checkpoint);
        run->source = imported.summary;
        run->options.checkpoint = &run->checkpoint;
    } else {
        run->options.rtn_bits = r.woq.bits();
        run->options.rtn_group_size = r.woq.group_size.value_or(kGroupPerChannel);
        run->source = {{"method", "rtn"}, {"dtype", r.woq.dtype}, {"group_size", run->options.rtn_group_size}};
    }
    options.woq = run->options;
    return run;
}

}  // namespace

bool OptimizeRequest::wants_woq() const {
    return !low_precision_checkpoint.empty() || !woq.dtype.empty() || woq.lowp_mode.has_value();
}

void OptimizeRequest::check_conversions() const {
    if (!qconfig.empty() && wants_woq())
        throw_usage("--qconfig (INT8 static quantization) cannot be combined with --low-precision-checkpoint, "
                    "--woq-dtype or --lowp-mode (weight-only quantization); choose one");
}

void OptimizeRequest::check_woq() const {
    const bool checkpoint = !low_precision_checkpoint.empty();
    if (!checkpoint && woq.dtype.empty()) {
        if (woq.lowp_mode) throw_usage("--lowp-mode needs --low-precision-checkpoint or --woq-dtype");
        if (woq.group_size) throw_usage("--group-size needs --woq-dtype");
        if (allow_partial) throw_usage("--allow-partial needs --low-precision-checkpoint");
        return;
    }
    if (checkpoint && !woq.dtype.empty())
        throw_usage("--woq-dtype quantizes without a checkpoint; give either it or --low-precision-checkpoint");
    if (checkpoint && woq.group_size)
        throw_usage("--group-size applies to --woq-dtype; the checkpoint carries its own group size");
    if (allow_partial && !checkpoint) throw_usage("--allow-partial needs --low-precision-checkpoint");
    if (portable)
        throw_usage("weight-only linears need libipex_ops.so, so the model cannot be --portable; drop one of them");
    woq.check();
}

nlohmann::json OptimizeReport::to_json() const {
    nlohmann::json j = pipeline;
    j["input"] = in;
    j["output"] = out;
    j["dtype"] = dtype;
    j["level"] = level;
    j["keep_dtype"] = keep_dtype;
    j["sample_inputs"] = sample_inputs;
    j["op_histogram"] = {{"before", ops_before}, {"after", ops_after}};
    j["bytes"] = {{"before", bytes_before}, {"after", bytes_after}};
    if (woq) j["woq"] = *woq;
    j["elapsed_ms"] = elapsed_ms;
    return j;
}

std::string OptimizeReport::text() const {
    std::string summary;
    for (const AppliedPass &p : applied)
        if (p.count > 0) summary += " " + p.name + "=" + std::to_string(p.count);
    return "wrote " + out + " (" + dtype + ", " + level + ";" + (summary.empty() ? " no rewrites" : summary) + ")";
}

OptimizeReport run_optimize(const OptimizeRequest &r) {
    const auto start = std::chrono::steady_clock::now();
    r.check_conversions();
    model::LoadedModel input = model::load_model(r.in);
    const quant::QConfig qconfig =
        r.qconfig.empty() ? quant::QConfig{} : quant::load_qconfig_for_model(r.qconfig, input.module);
    check_output_path(r.out, r.qconfig.empty() ? std::vector<std::string>{r.in}
                                               : std::vector<std::string>{r.in, r.qconfig});
    if (r.report.to_file() && absolute_path(r.report.target) == absolute_path(r.out))
        throw_usage("--report '" + r.report.target + "' names the output model '" + r.out + "'; give another file");
    r.report.check({r.in, r.out});

    passes::OptimizeOptions options;
    options.dtype = r.dtype;
    options.level = r.level;
    options.portable = r.portable;
    options.keep_dtype = r.keep_dtype;
    options.fp32_math_mode = r.fp32_math_mode;
    options.knob_overrides = r.knob_overrides;
    options.sample_inputs = make_inputs(r.sample_inputs, r.seed);
    if (!options.sample_inputs.empty()) {
        torch::jit::Module probe = input.module.clone();
        probe.eval();
        model::run_forward(probe, clone_inputs(options.sample_inputs), "'" + r.in + "'");
    }
    const std::unique_ptr<WoqRun> woq = prepare_woq(r, options, input.module);

    const passes::OptimizeResult result = r.qconfig.empty()
                                              ? passes::optimize_module(input.module, options)
                                              : quant::optimize_with_qconfig(input.module, qconfig, r.qconfig, options);
    OptimizeReport report;
    report.pipeline = result.report;
    report.ops_before = passes::op_histogram(*model::inlined_forward(input.module));
    // The optimized module holds copies of what it keeps: the input's tensors go before saving
    // (a model of many GB would otherwise be held twice while it is written).
    input.module = torch::jit::Module();
    nlohmann::json pass_counts = nlohmann::json::object();
    for (const passes::PassOutcome &p : result.passes) {
        if (!p.applied) continue;
        report.applied.push_back({p.name, p.count});
        pass_counts[p.name] = p.count;
    }
    report.sample_inputs = describe_inputs(options.sample_inputs);
    const nlohmann::json metadata = {
        {"tool", "ipex-tool"},
        {"version", IPEX_TOOL_VERSION},
        {"dtype", r.qconfig.empty() ? r.dtype : "int8"},
        {"level", r.level},
        {"keep_dtype", r.keep_dtype},
        {"portable", !result.prepacked && !woq},
        {"fp32_math_mode", result.fp32_math_mode},
        {"embedding_int8", result.prepacked && passes::knob_enabled(*passes::find_knob("embedding-int8"), options)},
        {"source", absolute_path(r.in)},
        {"source_bytes", input.bytes},
        {"sample_inputs", report.sample_inputs},
        {"passes", pass_counts},
    };
    model::save_model(result.module, r.out, metadata);

    report.in = r.in;
    report.out = r.out;
    report.dtype = r.dtype;
    report.level = r.level;
    report.keep_dtype = r.keep_dtype;
    report.ops_after = passes::op_histogram(*model::inlined_forward(result.module));
    report.bytes_before = input.bytes;
    report.bytes_after = file_size(r.out);
    if (woq) {
        nlohmann::json j = result.woq.value_or(woq::WoqReplaceReport{}).to_json();
        j["lowp_mode"] = woq->options.lowp_mode;
        j["source"] = woq->source;
        report.woq = j;
    }
    report.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return report;
}

}  // namespace ipex::commands
