#include "base/stats.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace ipex {

nlohmann::json LatencyStats::to_json() const {
    nlohmann::json j = {{"min", min}, {"mean", mean}, {"median", median}, {"max", max}, {"samples", samples}};
    for (const auto &[p, v] : percentiles) {
        std::ostringstream key;
        key << "p" << p;
        j[key.str()] = v;
    }
    return j;
}

LatencyStats summarize(std::vector<double> values, const std::vector<double> &percentiles) {
    LatencyStats s;
    if (values.empty()) return s;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    s.samples = n;
    s.min = values.front();
    s.max = values.back();
    s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
    s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    for (double p : percentiles) {
        size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
        rank = std::clamp<size_t>(rank, 1, n);
        s.percentiles[p] = values[rank - 1];
    }
    return s;
}

uint64_t peak_rss_bytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // ru_maxrss is KiB on Linux
}

}  // namespace ipex
