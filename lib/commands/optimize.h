// `ipex-tool optimize IN OUT`: the pass pipeline (or, with a qconfig, the INT8 conversion) on a
// TorchScript model, optionally with weight-only quantized linears; the model written with
// the metadata `bench --baseline stock` and `inspect` read, and the report of what each pass did.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commands/json_output.h"
#include "commands/weight_only.h"

namespace ipex::commands {

struct OptimizeRequest {
    std::string in, out;
    std::string dtype = "fp32";  // fp32 | bf16 | fp16
    std::string level = "O1";    // O0 | O1
    bool portable = false;       // no prepacked ops: stock libtorch runs the model
    bool keep_dtype = false;     // outputs in the compute dtype
    std::map<std::string, bool> knob_overrides;  // --KNOB / --no-KNOB given
    std::vector<std::string> sample_inputs;      // SPECs: specialize shapes, check the result runs
    uint64_t seed = 0;                           // of random sample inputs
    std::string fp32_math_mode = "fp32";         // fp32 | bf32
    std::string qconfig;                         // INT8 static quantization with this qconfig
    std::string low_precision_checkpoint;        // weight-only linears from this checkpoint...
    WoqRequest woq;                              // ... or quantized round-to-nearest (--woq-dtype)
    bool allow_partial = false;                  // a checkpoint that fits the model in part
    JsonOutput report;                           // --report FILE|-: a file is checked before the run

    bool wants_woq() const;
    // Exit 2 when INT8 static quantization (--qconfig) and weight-only quantization are both asked.
    void check_conversions() const;
    // Exit 2 unless the weight-only options go together (and with --portable).
    void check_woq() const;
};

// A pass that rewrote the model, from the pipeline's report.
struct AppliedPass {
    std::string name;
    int count = 0;
};

struct OptimizeReport {
    std::string in, out, dtype, level, sample_inputs;
    bool keep_dtype = false;
    nlohmann::json pipeline;  // the pipeline's own report: "passes", "warnings", "mode", ...
    std::vector<AppliedPass> applied;
    std::map<std::string, int> ops_before, ops_after;
    uint64_t bytes_before = 0, bytes_after = 0;
    std::optional<nlohmann::json> woq;  // replace_woq_linear's report, "lowp_mode" and "source"
    double elapsed_ms = 0;

    nlohmann::json to_json() const;
    // "wrote OUT (DTYPE, LEVEL; pass=count ...)": the line optimize logs.
    std::string text() const;
};

// Reads the qconfig or checkpoint and the model, checks the outputs, optimizes and writes OUT.
OptimizeReport run_optimize(const OptimizeRequest &request);

}  // namespace ipex::commands
