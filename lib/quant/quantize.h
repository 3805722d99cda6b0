// `ipex-tool quantize` and `optimize --qconfig`: checks a qconfig against the model (the
// identity, every op id, channel counts) before anything is rewritten, then converts:
// static INT8 from the qconfig, or dynamic INT8 linear (no qconfig).
#pragma once

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include <string>

#include "passes/pipeline.h"
#include "quant/qconfig.h"

namespace ipex::quant {

struct QuantizeOptions {
    bool portable = true;
    bool dynamic = false;
    // fp32 | bf16: with bf16 every float op outside the int8 regions (quantizable ops the qconfig
    // does not list or marks bf16 included) runs in bf16 (mixed_bf16.h)
    std::string mixed_dtype = "fp32";
};

struct QuantizeResult {
    torch::jit::Module module;
    nlohmann::json report;  // counts of what was converted
    std::vector<passes::PassOutcome> passes;  // the freeze/fold passes before the conversion
};

// `config` is ignored (may be empty) with options.dynamic; `where` names the qconfig file.
QuantizeResult quantize_model(const torch::jit::Module &model, const QConfig &config, const std::string &where,
                              const QuantizeOptions &options);

// `optimize --qconfig`: the INT8 conversion in place of the fp32 pass pipeline (the qconfig
// was made on the graph calibrate prepares, so the pipeline must be the same). --dtype bf16
// runs every float op outside int8 in bf16 (as --mixed-dtype bf16); fp16 is unsupported (exit 4).
passes::OptimizeResult optimize_with_qconfig(const torch::jit::Module &model, const QConfig &config,
                                             const std::string &where, const passes::OptimizeOptions &options);

}  // namespace ipex::quant
