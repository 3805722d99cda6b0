// The weight-only quantization a command asks for (optimize, generate, perplexity, bench --llm):
// --woq-dtype, --group-size, --lowp-mode, and the one place --lowp-mode auto is decided.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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

// How --lowp-mode auto picks the activations of weight-only layers: bf16 or fp32.
enum class LowpAuto {
    // optimize: bf16 when the model computes in bf16 or the CPU has BF16 dot products
    // (AVX512-BF16, or AMX-BF16 this process may use).
    bf16_model_or_cpu,
    // LLM commands: bf16 when the model computes in bf16 and the CPU has BF16 dot products.
    bf16_model_and_cpu,
};

// The rule in words, for help texts: "bf16 where ... , else fp32".
std::string lowp_auto_text(LowpAuto rule);

// `mode` (auto when unset) resolved to fp32, bf16 or int8 for a model computing in `dtype`.
std::string resolve_lowp_mode(const std::optional<std::string> &mode, const std::string &dtype, LowpAuto rule);

}  // namespace ipex::commands
