// Timing samples summarized one way for every report (bench, bench --llm), and the process's
// peak resident memory. Torch-free.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <vector>

namespace ipex {

struct LatencyStats {
    double min = 0, mean = 0, median = 0, max = 0;
    std::map<double, double> percentiles;  // percentile (e.g. 90) -> value
    size_t samples = 0;

    nlohmann::json to_json() const;  // min, mean, median, max, samples, p<percentile>...
};

// Nearest-rank percentiles over `values` (the smallest value with at least p% of the samples at
// or below it); the median is the middle value, or the mean of the middle two.
LatencyStats summarize(std::vector<double> values, const std::vector<double> &percentiles);

// The most resident memory this process has held (getrusage's ru_maxrss), in bytes.
uint64_t peak_rss_bytes();

}  // namespace ipex
