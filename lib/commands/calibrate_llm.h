// `ipex-tool calibrate-llm MODEL_DIR --text FILE -o QCONF.json`: SmoothQuant calibration of a
// decoder. The model runs in fp32 over the text's first --tokens tokens (windows of --context,
// no overlap) while every decoder projection records the max |x| of each input channel; the
// qconfig (llm/w8a8_config.h) holds those, the weights' per channel maxima, the smoothing
// factors for --alpha and the static activation scales. generate, perplexity and bench --llm
// load it with --qconfig.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace ipex::commands {

constexpr double kDefaultAlpha = 0.5;
constexpr int64_t kDefaultCalibrationTokens = 2048;

struct CalibrateLlmRequest {
    std::string model, text, out;
    double alpha = kDefaultAlpha;      // [0, 1]
    int64_t tokens = kDefaultCalibrationTokens;
    std::optional<int64_t> context;    // unset: llm::default_context
    std::optional<int> threads;
};

struct CalibrateLlmReport {
    std::string model, out;
    double alpha = 0;
    int64_t tokens = 0, projections = 0;
    nlohmann::json to_json() const;
    std::string text() const;  // "wrote OUT (P projections, T tokens, alpha A)"
};

// Exit 2 for an alpha outside [0, 1], a count out of range or an output that cannot be
// written; 3 for an unreadable text or model; 4 for a mixture-of-experts model.
CalibrateLlmReport run_calibrate_llm(const CalibrateLlmRequest &request);

}  // namespace ipex::commands
