#include "bench/harness.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "base/errors.h"

namespace ipex::bench {
namespace {

using Clock = std::chrono::steady_clock;

double time_ms(const RunFn &fn) {
    const auto start = Clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

std::optional<double> TimingResult::ratio() const {
    if (!baseline || candidate.median <= 0) return std::nullopt;
    return baseline->median / candidate.median;
}

std::vector<LatencyStats> time_round_robin(const std::vector<RunFn> &runners,
                                           const TimingOptions &options, int *iterations) {
    const size_t n = runners.size();
    for (int i = 0; i < options.warmup; ++i)
        for (const auto &run : runners) run();
    std::vector<std::vector<double>> ms(n);
    double first_total = 0;
    int done = 0;
    for (;; ++done) {
        if (options.duration_s) {
            if (done > 0 && first_total >= *options.duration_s * 1000.0) break;
            if (done >= kMaxTimedIterations) break;
        } else if (done >= options.iterations) {
            break;
        }
        // Rotate the starting runner so none always goes first.
        for (size_t k = 0; k < n; ++k) {
            const size_t r = (static_cast<size_t>(done) + k) % n;
            const double t = time_ms(runners[r]);
            ms[r].push_back(t);
            if (r == 0) first_total += t;
        }
    }
    if (iterations) *iterations = done;
    std::vector<LatencyStats> out;
    for (auto &samples : ms) out.push_back(summarize(samples, options.percentiles));
    return out;
}

TimingResult time_interleaved(const RunFn &candidate, const RunFn *baseline,
                              const TimingOptions &options) {
    std::vector<RunFn> runners{candidate};
    if (baseline) runners.push_back(*baseline);
    TimingResult r;
    const auto stats = time_round_robin(runners, options, &r.iterations);
    r.candidate = stats[0];
    if (baseline) r.baseline = stats[1];
    return r;
}

double peak_rss_mb() { return static_cast<double>(peak_rss_bytes()) / 1048576.0; }

std::string capture_stdout(const std::function<void()> &fn) {
    std::fflush(stdout);
    char path[] = "/tmp/ipex-capture-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) throw Error(ExitCode::internal, "cannot create a temporary file for capturing output");
    unlink(path);
    const int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    auto restore = [&] {
        std::fflush(stdout);
        dup2(saved, STDOUT_FILENO);
        close(saved);
    };
    try {
        fn();
    } catch (...) {
        restore();
        close(fd);
        throw;
    }
    restore();
    std::string text;
    lseek(fd, 0, SEEK_SET);
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    close(fd);
    return text;
}

std::string capture_onednn_verbose(const std::function<void()> &fn) {
    return capture_stdout([&] {
        dnnl_set_verbose(1);
        try {
            fn();
        } catch (...) {
            dnnl_set_verbose(0);
            throw;
        }
        dnnl_set_verbose(0);
    });
}

}  // namespace ipex::bench
