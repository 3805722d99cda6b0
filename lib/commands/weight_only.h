// The weight-only quantization a command asks for (optimize, generate, perplexity, bench --llm):
// --woq-dtype, --group-size and --lowp-mode.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/woq_format.h"

namespace ipex::commands {

struct WoqRequest {
    std::string dtype;                    // --woq-dtype: "" (none) | int4 | int8
    std::optional<int64_t> group_size;    // --group-size: > 0 or -1 (per output channel); unset: the default
    std::optional<std::string> lowp_mode;  // --lowp-mode: auto | fp32 | bf16 | int8; unset: auto

    int bits() const;  // 0, 4 or 8
    // Exit 2 naming --group-size unless it is unset, -1 or in [1, kMaxGroupSize].
    void check() const;
};

// What --group-size is when not given, per command.
constexpr int64_t kGroupPerChannel = -1;  // optimize: one scale per output channel
constexpr int64_t kGroupAuto = 0;         // LLM commands: 128 where it divides a layer's inputs, else per channel
constexpr int64_t kMaxGroupSize = int64_t(1) << 24;

// --lowp-mode auto: the rule is the weight-only format's (checkpoint/woq_format.h), shared
// with the LLM library's own callers.
using woq::LowpAuto;
using woq::lowp_auto_text;
using woq::resolve_lowp_mode;

}  // namespace ipex::commands
