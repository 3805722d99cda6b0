// The optimize pipeline: eval + freeze, then the graph passes in a fixed order, each
// switched by a knob (--[no-]KNOB) whose default comes from the level (O0/O1).
#pragma once

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "ir/pass_result.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ipex::passes {

// One row per --[no-]KNOB flag of `ipex-tool optimize`.
struct Knob {
    const char *flag;       // "conv-bn-folding"
    const char *pass;       // pass name in the report, "fold_conv_bn"
    bool on_at_o1;          // default at O1 (everything is off at O0)
    bool available;         // false: belongs to later work, reported as not_available
    const char *help;
};

const std::vector<Knob> &knobs();

struct OptimizeOptions {
    std::string dtype = "fp32";        // fp32 | bf16 | fp16
    std::string level = "O1";          // O0 | O1
    bool portable = true;
    bool keep_dtype = false;           // return low-precision outputs as they are
    std::map<std::string, bool> knob_overrides;  // flag -> on/off, from the command line
    std::vector<c10::IValue> sample_inputs;      // specialize shapes; also a run check
    std::string fp32_math_mode = "fp32";
    // Passes run right after freezing, before the knob passes (e.g. weight-only quantization,
    // which matches Linears by module path before concat-linear merges them).
    struct EarlyPass {
        std::string name;
        std::function<PassResult(std::shared_ptr<torch::jit::Graph> &)> run;
    };
    std::vector<EarlyPass> early_passes;
    // replace_pooling (off when preparing a model for int8: the quantizer passes int8 values
    // through aten::max_pool2d and adaptive_avg_pool2d as they are).
    bool replace_pooling = true;
};

struct OptimizeResult {
    torch::jit::Module module;
    nlohmann::json report;  // "passes", "warnings", "mode" ... (the command adds file facts)
    std::vector<std::string> warnings;
};

// Optimizes a copy of `input`; `input` itself is not modified.
OptimizeResult optimize_module(const torch::jit::Module &input, const OptimizeOptions &options);

// Whether a knob is on for these options (level default, then the override).
bool knob_enabled(const Knob &knob, const OptimizeOptions &options);

}  // namespace ipex::passes
