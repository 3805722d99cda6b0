// Timing harness shared by `ipex-tool bench` and bench/: warmup, then candidate and
// baseline interleaved (A B B A ...) on the same inputs, medians and ratios.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/stats.h"

namespace ipex::bench {

// One summary of timing samples for every report (base/stats.h: nearest-rank percentiles).
using ipex::LatencyStats;
using ipex::summarize;

// Bounds of the timing options (bench --iterations, --warmup, --duration): the samples of one
// run stay within 80 MB per timed model, and a --duration run also stops at kMaxTimedIterations.
constexpr int kMaxTimedIterations = 10'000'000;
constexpr double kMaxTimedSeconds = 86400.0;

struct TimingOptions {
    int warmup = 10;
    int iterations = 100;                 // used when duration_s is not set
    std::optional<double> duration_s;     // run until this much candidate time has passed
    std::vector<double> percentiles{50, 90, 99};
};

struct TimingResult {
    LatencyStats candidate;
    std::optional<LatencyStats> baseline;
    int iterations = 0;
    // baseline median / candidate median (> 1 means the candidate is faster)
    std::optional<double> ratio() const;
};

using RunFn = std::function<void()>;

// Times `candidate` (and `baseline` when given) alternately: A B, then B A, so drift
// and cache warmth hit both equally.
TimingResult time_interleaved(const RunFn &candidate, const RunFn *baseline,
                              const TimingOptions &options);

// Times several runners in turn, rotating which goes first each iteration. Returns one
// LatencyStats per runner; the duration budget counts the first runner's time.
std::vector<LatencyStats> time_round_robin(const std::vector<RunFn> &runners,
                                           const TimingOptions &options, int *iterations = nullptr);

// Peak resident set size of this process in MiB.
double peak_rss_mb();

// Runs fn with this process's stdout redirected to a temporary file and returns what
// was written to it (oneDNN's verbose output goes to stdout).
std::string capture_stdout(const std::function<void()> &fn);

// Runs fn once with oneDNN verbose on and returns the captured verbose text.
std::string capture_onednn_verbose(const std::function<void()> &fn);

}  // namespace ipex::bench
