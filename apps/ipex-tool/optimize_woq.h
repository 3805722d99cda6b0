// optimize's weight-only quantization flags (--low-precision-checkpoint, --woq-dtype,
// --group-size, --lowp-mode, --allow-partial) and the pass they add to the pipeline.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "passes/pipeline.h"
#include "passes/replace_woq_linear.h"

namespace ipex::app {

struct WoqArgs {
    std::string checkpoint;     // --low-precision-checkpoint
    std::string woq_dtype;      // --woq-dtype int4|int8
    int64_t group_size = 0;     // --group-size (0: not given)
    std::string lowp_mode;      // --lowp-mode
    bool allow_partial = false; // --allow-partial
};

// The pass's checkpoint and options, and what it did (set from the optimize result).
struct WoqRun {
    woq::WoqCheckpoint checkpoint;
    woq::WoqReplaceOptions options;
    woq::WoqReplaceReport report;
    nlohmann::json source;
    nlohmann::json to_json() const;
};

void add_woq_options(CLI::App &sub, WoqArgs &args);

// Checks the flag combination, reads the checkpoint (exit 3 on bad files) and sets the
// replace_woq_linear pass's options in `options`; nullptr when no weight-only flag was given.
// The returned run (holding the checkpoint) and `model` (the input) must outlive the optimize
// run; its report is the pipeline's (OptimizeResult::woq).
std::shared_ptr<WoqRun> woq_pass_options(const WoqArgs &args, const std::string &dtype, bool portable,
                                     passes::OptimizeOptions &options, const torch::jit::Module &model);

}  // namespace ipex::app
