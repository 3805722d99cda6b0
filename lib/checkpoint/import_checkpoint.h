// Import of GPTQ/AWQ safetensors checkpoints into the normalized weight-only checkpoint
// (woq_format.h). Everything is read and validated before anything is written.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "checkpoint/woq_format.h"

namespace ipex::woq {

struct ImportOptions {
    std::string method = "auto";     // gptq | awq | auto (from the config files, then the shapes)
    int bits = 0;                    // 0: from the config, else inferred
    int group_size = 0;              // 0: from the config, else inferred; -1 per channel
    std::string checkpoint_format;   // "" | gptq | gptq_v2 (GPTQ zero convention)
};

struct ImportResult {
    WoqCheckpoint checkpoint;
    nlohmann::json summary;  // method, source_format, bits, group_size, layers, act_order, bytes...
    std::vector<std::string> files;  // the safetensors files read
};

// Reads the checkpoint at `path` (.safetensors file, index .json, or directory).
ImportResult import_checkpoint(const std::string &path, const ImportOptions &options);

// What --low-precision-checkpoint accepts: a normalized checkpoint, or a GPTQ/AWQ checkpoint
// imported on the fly with `import auto` settings.
ImportResult load_low_precision_checkpoint(const std::string &path);

}  // namespace ipex::woq
