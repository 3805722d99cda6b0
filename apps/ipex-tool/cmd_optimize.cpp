// ipex-tool optimize IN OUT: see commands/optimize.h.
#include "base/log.h"
#include "commands.h"
#include "commands/optimize.h"
#include "options.h"
#include "passes/knobs.h"

namespace ipex::app {

Runner setup_optimize(CLI::App &sub) {
    auto r = std::make_shared<commands::OptimizeRequest>();
    auto knobs = std::make_shared<std::map<std::string, int>>();  // +1 --KNOB, -1 --no-KNOB, 0 not given
    sub.add_option("IN", r->in, "TorchScript model to optimize")->required();
    sub.add_option("OUT", r->out, "where to write the optimized model")->required();
    sub.add_option("--dtype", r->dtype, "compute dtype")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
        ->capture_default_str();
    sub.add_option("--level", r->level, "O0 writes the model unchanged; O1 turns on the defaults")
        ->check(CLI::IsMember({"O0", "O1"}))
        ->capture_default_str();
    sub.add_flag("--portable", r->portable,
                 "write a model that stock PyTorch/libtorch runs with no extra library (no prepacked "
                 "ops; the default needs libipex_ops.so)");
    sub.add_flag("--keep-dtype", r->keep_dtype, "return outputs in the compute dtype instead of fp32");
    for (const auto &k : passes::kKnobs) {
        const std::string flag = k.flag;
        sub.add_flag("--" + flag + ",!--no-" + flag, (*knobs)[flag],
                     std::string(k.help) + " (default at O1: " + (k.on_at_o1 ? "on" : "off") + ")");
    }
    sub.add_option("--sample-input", r->sample_inputs,
                   "input SPEC (repeatable): specializes shapes and checks the result runs")
        ->allow_extra_args(false);
    sub.add_option("--seed", r->seed, "seed for random sample inputs")->capture_default_str();
    add_json_option(sub, r->report, JsonForm::file, "write the JSON report to FILE, or - for stdout", "--report");
    sub.add_option("--fp32-math-mode", r->fp32_math_mode, "fp32 keeps strict fp32; bf32 lets prepacked fp32 conv/linear compute in bf16")
        ->check(CLI::IsMember({"fp32", "bf32"}))
        ->capture_default_str();
    sub.add_option("--qconfig", r->qconfig,
                   "INT8 qconfig from 'ipex-tool calibrate': convert to static INT8 (--dtype bf16: ops outside "
                   "int8 in bf16)");
    sub.add_option("--low-precision-checkpoint", r->low_precision_checkpoint,
                   "weight-only checkpoint written by 'ipex-tool import', or a GPTQ/AWQ checkpoint (imported "
                   "with 'import auto' settings): its Linears replace the model's by module path");
    add_woq_options(sub, r->woq, {commands::kGroupPerChannel, commands::LowpAuto::bf16_model_or_cpu, "", nullptr});
    sub.add_flag("--allow-partial", r->allow_partial,
                 "replace the Linears the checkpoint matches; list missing, mismatched and unused layers in the "
                 "report instead of failing");
    return [r, knobs] {
        for (const auto &[flag, v] : *knobs)
            if (v != 0) r->knob_overrides[flag] = v > 0;
        const commands::OptimizeReport report = commands::run_optimize(*r);
        r->report.write(report.to_json());
        log::info(report.text());
        return 0;
    };
}

}  // namespace ipex::app
