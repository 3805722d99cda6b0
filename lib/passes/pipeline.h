// The optimize pipeline: eval + freeze, then the graph passes of one list (pipeline.cpp) in
// its order, each switched by its knob (knobs.h: --[no-]KNOB, default from the level) and by
// what it needs (prepacked ops, a low-precision dtype); every pass has one report entry.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "ir/pass_result.h"
#include "passes/knobs.h"
#include "passes/replace_woq_linear.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ipex::passes {

struct OptimizeOptions {
    std::string dtype = "fp32";        // fp32 | bf16 | fp16
    std::string level = "O1";          // O0 | O1
    bool portable = true;
    bool keep_dtype = false;           // return low-precision outputs as they are
    std::map<std::string, bool> knob_overrides;  // flag -> on/off, from the command line
    std::vector<c10::IValue> sample_inputs;      // specialize shapes; also a run check
    std::string fp32_math_mode = "fp32";
    // Weight-only quantization: replace_woq_linear with these options, first after freezing
    // (it matches Linears by module path before concat-linear merges them). Its checkpoint and
    // module must outlive the run.
    std::optional<woq::WoqReplaceOptions> woq;
    // decompose_transformer_layer also when neither a low-precision dtype nor prepacking
    // follows (the int8 quantizer: it brings scripted transformer layers' linears to the top).
    bool decompose_transformer_layers = false;
    // replace_pooling (off when preparing a model for int8: the quantizer passes int8 values
    // through aten::max_pool2d and adaptive_avg_pool2d as they are).
    bool replace_pooling = true;
};

// One entry of the report's "passes", typed: the pass ran (else it was disabled) and how many
// things it rewrote.
struct PassOutcome {
    std::string name;
    bool applied = false;
    int count = 0;
};

struct OptimizeResult {
    torch::jit::Module module;
    std::vector<PassOutcome> passes;      // in the order they ran ("freeze" first)
    bool prepacked = false;               // the prepacked oneDNN ops were on ("mode")
    std::string fp32_math_mode = "fp32";  // what prepacked fp32 convolutions and linears run in
    nlohmann::json report;  // "passes", "warnings", "mode" ... (the command adds file facts)
    std::vector<std::string> warnings;
    std::optional<woq::WoqReplaceReport> woq;  // what replace_woq_linear did, when it ran
};

// Optimizes a copy of `input`; `input` itself is not modified.
OptimizeResult optimize_module(const torch::jit::Module &input, const OptimizeOptions &options);

// Whether a knob is on for these options (level default, then the override).
bool knob_enabled(const Knob &knob, const OptimizeOptions &options);

// The passes in the order they run and the report lists them ("freeze" first).
std::vector<std::string> pass_names();

}  // namespace ipex::passes
