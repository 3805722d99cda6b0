// `ipex-tool bench MODEL`: a TorchScript model timed on given or recorded inputs, optionally
// interleaved with a baseline (the original in stock libtorch, or another file) and with the
// ISA oneDNN ran it on checked; or, with --profile, profiled op by op against the machine's
// measured peaks. (`bench MODEL_DIR --llm` is commands/llm_bench.h.)
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/onednn_verbose.h"
#include "bench/harness.h"
#include "bench/machine_limits.h"
#include "bench/profile.h"
#include "commands/json_output.h"

namespace ipex::commands {

// The share of convolution/matmul time --check-isa asks to run on the ISA or a superset: the
// same default as ipex-launch --require-isa.
constexpr double kIsaShareRequired = 0.9;

struct BenchRequest {
    std::string model;
    std::vector<std::string> inputs;  // SPECs; empty: the model's recorded --sample-input
    uint64_t seed = 0;                // of random inputs
    bench::TimingOptions timing;      // warmup, iterations or duration, percentiles
    std::optional<int> threads;       // unset: default_threads()
    std::string baseline;             // "" | "stock" | FILE
    std::string original;             // --baseline stock: the original (default: MODEL's record)
    std::string check_isa;            // "": no check
    std::string fp32_math_mode = "fp32";  // bf32: oneDNN may compute the candidate's fp32 in bf16
    bool profile = false;             // op by op after the timed iterations
    bool profile_layers = false;      // ... with a row per layer
    JsonOutput json;                  // a file target is checked before the timing
};

// --check-isa: the oneDNN verbose lines of one run.
struct IsaCheck {
    std::string flag;   // as the user gave it
    std::string asked;  // oneDNN's name for it
    VerboseStats stats;
    double share = 0;   // of compute time on `asked` or a superset
    bool ok = false;

    nlohmann::json to_json() const;
};

// The caching CPU allocator's counters (ops/cpu_allocator.h) when it is on.
struct CpuCacheReport {
    int64_t limit_mb = 0, hits = 0, misses = 0, evictions = 0;
    double peak_cached_mb = 0;

    nlohmann::json to_json() const;
};

struct BaselineReport {
    std::string kind;   // "file", or the stock runner's kind
    std::string model;
    std::optional<bench::LatencyStats> latency;

    nlohmann::json to_json() const;
};

struct BenchReport {
    std::string model, dtype, inputs, fp32_math_mode;
    int threads = 0, iterations = 0, warmup = 0;
    int64_t batch = 1;
    bench::LatencyStats latency;
    double throughput_per_s = 0, peak_rss_mb = 0;
    std::optional<BaselineReport> baseline;
    std::optional<double> ratio;  // baseline median / candidate median
    std::optional<IsaCheck> isa;
    std::optional<CpuCacheReport> cpu_cache;

    nlohmann::json to_json() const;
    std::string text() const;
    // Exit 1 when --check-isa was not met.
    void check() const;
};

struct ProfileReport {
    std::string model, dtype, inputs;
    int threads = 0, warmup = 0, timed_iterations = 0;
    bench::MachineLimits limits;
    bool remeasured = false;  // an op ran above the first figures: measured twice, the higher kept
    bench::Profile profile;

    nlohmann::json to_json() const;
    std::string text() const;
    void check() const {}
};

// Loads the model and its inputs (exit 2/3 before any timing), then times or profiles it.
std::variant<BenchReport, ProfileReport> run_bench(const BenchRequest &request);

}  // namespace ipex::commands
