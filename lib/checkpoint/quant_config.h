// Quantization settings of a GPTQ/AWQ checkpoint, read from quantize_config.json (AutoGPTQ,
// GPTQModel), quant_config.json (AutoAWQ) or config.json's "quantization_config"
// (transformers). Unknown fields are ignored; known fields of the wrong type are exit 3.
#pragma once

#include <optional>
#include <string>

namespace ipex::woq {

struct QuantConfig {
    std::string method;             // "gptq" | "awq" | "" (not stated)
    int bits = 0;                   // 0: not stated
    int group_size = 0;             // 0: not stated; -1: one group per output channel
    std::optional<bool> desc_act;   // GPTQ act-order
    std::optional<bool> sym;        // GPTQ symmetric
    std::optional<bool> zero_point; // AWQ
    std::string checkpoint_format;  // "gptq" | "gptq_v2" | "" (GPTQ zero convention)
    std::string awq_version;        // "gemm" | "gemv" | "" (lower-cased)
    std::string source;             // file the settings came from ("" when none)
};

// Parses one config file's text; `source` names it in messages. A config.json without
// "quantization_config" gives an empty QuantConfig (nothing stated).
QuantConfig parse_quant_config(const std::string &text, const std::string &source);

// Looks for the config files in `dir`, in the order quantize_config.json, quant_config.json,
// config.json; the first that states a method or bits wins. nullopt when none does.
std::optional<QuantConfig> detect_quant_config(const std::string &dir);

}  // namespace ipex::woq
