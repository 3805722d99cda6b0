#include <chrono>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <sys/stat.h>

#include "commands.h"
#include "base/atomic_file.h"
#include "base/errors.h"
#include "base/log.h"
#include "core/tensor_spec.h"
#include "model/inspect.h"
#include "model/load.h"
#include "optimize_woq.h"
#include "ir/graph_utils.h"
#include "passes/pipeline.h"
#include "quant/qconfig.h"
#include "quant/quantize.h"

namespace ipex::app {
namespace {

struct OptimizeArgs {
    std::string in, out;
    std::string dtype = "fp32";
    std::string level = "O1";
    bool portable = false;
    bool keep_dtype = false;
    std::map<std::string, int> knobs;  // +1 --KNOB, -1 --no-KNOB, 0 not given
    std::vector<std::string> sample_inputs;
    uint64_t seed = 0;
    std::string report;
    std::string fp32_math_mode = "fp32";
    std::string qconfig;
    WoqArgs woq;  // --low-precision-checkpoint, --woq-dtype, --group-size, --lowp-mode, --allow-partial
};


uint64_t file_size(const std::string &path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// INT8 static quantization and weight-only quantization are two different conversions.
void reject_conflicts(const OptimizeArgs &a) {
    const bool woq = !a.woq.checkpoint.empty() || !a.woq.woq_dtype.empty() || !a.woq.lowp_mode.empty();
    if (!a.qconfig.empty() && woq)
        throw_usage("--qconfig (INT8 static quantization) cannot be combined with --low-precision-checkpoint, "
                    "--woq-dtype or --lowp-mode (weight-only quantization); choose one");
}

int run_optimize(const OptimizeArgs &a) {
    const auto start = std::chrono::steady_clock::now();
    reject_conflicts(a);
    const quant::QConfig qconfig = a.qconfig.empty() ? quant::QConfig{} : quant::load_qconfig(a.qconfig);
    const model::LoadedModel input = model::load_model(a.in);
    check_output_path(a.out, a.qconfig.empty() ? std::vector<std::string>{a.in}
                                               : std::vector<std::string>{a.in, a.qconfig});
    if (!a.report.empty() && a.report != "-") {
        if (absolute_path(a.report) == absolute_path(a.out))
            throw_usage("--report '" + a.report + "' names the output model '" + a.out + "'; give another file");
        check_output_path(a.report, {a.in, a.out});
    }

    passes::OptimizeOptions options;
    options.dtype = a.dtype;
    options.level = a.level;
    options.portable = a.portable;
    options.keep_dtype = a.keep_dtype;
    options.fp32_math_mode = a.fp32_math_mode;
    for (const auto &[flag, v] : a.knobs)
        if (v != 0) options.knob_overrides[flag] = v > 0;
    options.sample_inputs = make_inputs(a.sample_inputs, a.seed);
    if (!options.sample_inputs.empty()) {
        torch::jit::Module probe = input.module.clone();
        probe.eval();
        model::run_forward(probe, clone_inputs(options.sample_inputs), "'" + a.in + "'");
    }

    const auto woq = woq_pass_options(a.woq, a.dtype, a.portable, options, input.module);

    passes::OptimizeResult result = a.qconfig.empty()
                                        ? passes::optimize_module(input.module, options)
                                        : quant::optimize_with_qconfig(input.module, qconfig, a.qconfig, options);
    if (woq && result.woq) woq->report = *result.woq;

    nlohmann::json pass_counts = nlohmann::json::object();
    std::string fp32_math_mode = "fp32";  // what prepacking ran: strict fp32 where the CPU has no bf32
    for (const auto &p : result.report["passes"]) {
        if (p["status"] == "applied") pass_counts[p["name"].get<std::string>()] = p["count"];
        if (p["name"] == "weights_prepack" && p.contains("fp32_math_mode")) fp32_math_mode = p["fp32_math_mode"];
    }
    const nlohmann::json metadata = {
        {"tool", "ipex-tool"},
        {"version", IPEX_TOOL_VERSION},
        {"dtype", a.qconfig.empty() ? a.dtype : "int8"},
        {"level", a.level},
        {"keep_dtype", a.keep_dtype},
        {"portable", result.report["mode"] == "portable" && !woq},
        {"fp32_math_mode", fp32_math_mode},
        {"source", absolute_path(a.in)},
        {"source_bytes", input.bytes},
        {"sample_inputs", describe_inputs(options.sample_inputs)},
        {"passes", pass_counts},
    };
    model::save_model(result.module, a.out, metadata);

    nlohmann::json report = result.report;
    report["input"] = a.in;
    report["output"] = a.out;
    report["dtype"] = a.dtype;
    report["level"] = a.level;
    report["keep_dtype"] = a.keep_dtype;
    report["sample_inputs"] = describe_inputs(options.sample_inputs);
    report["op_histogram"] = {
        {"before", passes::op_histogram(*model::inlined_forward(input.module))},
        {"after", passes::op_histogram(*model::inlined_forward(result.module))}};
    report["bytes"] = {{"before", input.bytes}, {"after", file_size(a.out)}};
    if (woq) report["woq"] = woq->to_json();
    report["elapsed_ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!a.report.empty()) write_text_atomically(a.report, report.dump(2) + "\n");

    std::string summary;
    for (const auto &p : report["passes"])
        if (p["status"] == "applied" && p["count"].get<int>() > 0)
            summary += " " + p["name"].get<std::string>() + "=" + std::to_string(p["count"].get<int>());
    log::info("wrote " + a.out + " (" + a.dtype + ", " + a.level + ";" +
              (summary.empty() ? " no rewrites" : summary) + ")");
    return 0;
}

}  // namespace

Runner setup_optimize(CLI::App &sub) {
    auto a = std::make_shared<OptimizeArgs>();
    sub.add_option("IN", a->in, "TorchScript model to optimize")->required();
    sub.add_option("OUT", a->out, "where to write the optimized model")->required();
    sub.add_option("--dtype", a->dtype, "compute dtype")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
        ->capture_default_str();
    sub.add_option("--level", a->level, "O0 writes the model unchanged; O1 turns on the defaults")
        ->check(CLI::IsMember({"O0", "O1"}))
        ->capture_default_str();
    sub.add_flag("--portable", a->portable,
                 "write a model that stock PyTorch/libtorch runs with no extra library (no prepacked "
                 "ops; the default needs libipex_ops.so)");
    sub.add_flag("--keep-dtype", a->keep_dtype, "return outputs in the compute dtype instead of fp32");
    for (const auto &k : passes::kKnobs) {
        const std::string flag = k.flag;
        a->knobs[flag] = 0;
        sub.add_flag("--" + flag + ",!--no-" + flag, a->knobs[flag],
                     std::string(k.help) + " (default at O1: " + (k.on_at_o1 ? "on" : "off") + ")");
    }
    sub.add_option("--sample-input", a->sample_inputs,
                   "input SPEC (repeatable): specializes shapes and checks the result runs")
        ->allow_extra_args(false);
    sub.add_option("--seed", a->seed, "seed for random sample inputs")->capture_default_str();
    sub.add_option("--report", a->report, "write the JSON report to FILE, or - for stdout");
    sub.add_option("--fp32-math-mode", a->fp32_math_mode, "fp32 keeps strict fp32; bf32 lets prepacked fp32 conv/linear compute in bf16")
        ->check(CLI::IsMember({"fp32", "bf32"}))
        ->capture_default_str();
    sub.add_option("--qconfig", a->qconfig,
                   "INT8 qconfig from 'ipex-tool calibrate': convert to static INT8 (--dtype bf16: ops outside "
                   "int8 in bf16)");
    add_woq_options(sub, a->woq);
    return [a] { return run_optimize(*a); };
}

}  // namespace ipex::app
