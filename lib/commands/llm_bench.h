// `ipex-tool bench MODEL_DIR --llm`: first-token and next-token latency of a Hugging Face
// decoder, against the machine: the prefill's share of the compute peak and the next token's
// ratio to the weight-streaming floor (the bytes one token reads over the read bandwidth).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/machine_limits.h"
#include "commands/json_output.h"
#include "commands/llm_load.h"
#include "llm/generate.h"

namespace ipex::commands {

struct LlmBenchRequest {
    std::string model;           // MODEL_DIR
    LlmLoadRequest load;
    llm::LlmBenchOptions run;    // tokens, batch, iterations, warmup, seed, allow_long_context
    double bandwidth_gbs = 0;    // --bandwidth-gbs; 0: measured at start-up on the run's threads
    double peak_gflops = 0;      // --peak-gflops; 0: measured (bf16 dot peak, fp32 FMA with --dtype fp32)
    JsonOutput json;             // a file target is checked before anything is measured
};

// The figures the latencies are compared with, given or measured.
struct LlmLimits {
    std::optional<bench::MachineLimits> measured;  // when either figure was not given
    double peak_gflops = 0;
    bool peak_given = false;
    std::string peak_kind = "given";  // given | bf16_dot | fp32_fma
    double bandwidth_gbs = 0;
    bool bandwidth_given = false;
    // A measured limit the run itself went past, after one more measurement:
    // "prefill_above_measured_peak", "decode_above_measured_bandwidth".
    std::vector<std::string> flags;

    nlohmann::json to_json() const;
};

struct LlmBenchReport {
    std::string model, architecture, weights;
    int threads = 0;
    llm::LlmBenchOptions run;
    llm::LlmBenchResult result;
    LlmLimits limits;
    uint64_t load_peak_rss_bytes = 0;  // the process's peak RSS when the model had loaded
    double load_ms = 0;                // wall time of the load: read, convert, quantize, pack
    bool weights_mapped = true;        // dense weights read in place from the mapped file (not --no-mmap)

    // Milliseconds one token takes to stream the weights at the bandwidth (0: no bandwidth).
    double bandwidth_floor_ms() const;
    nlohmann::json to_json() const;
    std::string text() const;
};

// Checks the request against the model's config, measures the limits, loads and times.
LlmBenchReport run_llm_bench(const LlmBenchRequest &request);

// A measured limit the run went past was measured low (a busy host, a short probe): `remeasure`
// once and keep the higher figure of each; one still beaten is flagged in report.limits.flags
// (and warned), so no share above the limit reads as a fact. Given limits are the user's and
// stay as they are.
void reconcile_limits(LlmBenchReport &report, const std::function<bench::MachineLimits()> &remeasure);

}  // namespace ipex::commands
