// `ipex-tool perplexity MODEL_DIR --text FILE`: a quality gate for converted and quantized
// models (Hugging Face's strided evaluation), optionally against a ceiling.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "commands/llm_load.h"
#include "llm/generate.h"

namespace ipex::commands {

struct PerplexityRequest {
    std::string model, text;         // MODEL_DIR, the UTF-8 text file
    std::optional<int64_t> context;  // unset: llm::default_context
    std::optional<int64_t> stride;   // unset: context / 2
    std::optional<double> max_ppl;   // the gate: check() fails above it
    bool allow_long_context = false;
    LlmLoadRequest load;
};

struct PerplexityReport {
    std::string model, weights, text_file;
    int64_t context = 0, stride = 0;
    std::optional<double> max_ppl;
    llm::PerplexityResult result;

    bool ok() const;  // finite and within --max-ppl
    // JSON has no NaN: a perplexity that is not finite is null, with "finite": false.
    nlohmann::json to_json() const;
    std::string text() const;
    // Exit 1 when the perplexity is not finite or above --max-ppl.
    void check() const;
};

// Checks the options, the text, the config and the tokenizer before the weights load; then scores.
PerplexityReport run_perplexity(const PerplexityRequest &request);

}  // namespace ipex::commands
