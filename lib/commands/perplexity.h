// `ipex-tool perplexity MODEL_DIR --text FILE`: a quality gate for converted and quantized
// models (Hugging Face's strided evaluation), optionally against a ceiling, and with --baseline
// against the same model loaded without its quantization (what --qconfig / --woq-dtype cost).
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
    // Also score the model without --qconfig / --woq-dtype (same --dtype), in the same run on
    // the same windows; implied by max_increase.
    bool baseline = false;
    std::optional<double> max_increase;  // percent: the gate on (ppl - baseline) / baseline
    LlmLoadRequest load;
};

// The model scored without the request's quantization.
struct PerplexityBaseline {
    std::string weights;
    llm::PerplexityResult result;
};

struct PerplexityReport {
    std::string model, weights, text_file;
    int64_t context = 0, stride = 0;
    std::optional<double> max_ppl;
    llm::PerplexityResult result;
    std::optional<PerplexityBaseline> baseline;
    std::optional<double> max_increase;  // percent

    // (ppl - baseline) / baseline in percent; NaN without a baseline or when either is not finite.
    double increase_percent() const;
    // finite (the baseline's too), within --max-ppl and within --max-increase
    bool ok() const;
    // JSON has no NaN: a perplexity that is not finite is null, with "finite": false.
    nlohmann::json to_json() const;
    std::string text() const;
    // Exit 1 when a perplexity is not finite, above --max-ppl or more than --max-increase
    // percent above the baseline's.
    void check() const;
};

// Checks the options, the text, the config and the tokenizer before the weights load; then scores
// (the baseline first, its weights released before the quantized model loads).
PerplexityReport run_perplexity(const PerplexityRequest &request);

}  // namespace ipex::commands
