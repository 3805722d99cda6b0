// `ipex-tool import {gptq|awq|auto} CHECKPOINT OUT`: a GPTQ/AWQ checkpoint converted into the
// ipex-woq weight-only checkpoint optimize --low-precision-checkpoint reads.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ipex::commands {

struct ImportRequest {
    std::string method;  // gptq | awq | auto
    std::string checkpoint, out;
    int bits = 0;                   // 0: the config's
    int group_size = 0;             // 0: the config's; -1: per channel
    std::string checkpoint_format;  // "": gptq (v1); gptq_v2
};

struct ImportReport {
    nlohmann::json summary;  // the summary of checkpoint/import_checkpoint.h, with "output"

    nlohmann::json to_json() const { return summary; }
    std::string text() const;
};

ImportReport run_import(const ImportRequest &request);

}  // namespace ipex::commands
