// `ipex-tool bench MODEL --streams N`: throughput mode, as OpenVINO's benchmark_app runs it.
// The process's CPUs are cut into N pools (runtime/cpu_pool.h, IPEX's MultiStreamModule cut);
// each stream is a thread pinned to its pool with an OpenMP team of its size, running requests
// of the whole input back to back on the one loaded model. Reported: total samples per second
// over the wall time of the timed requests of all streams, and the per-request latency.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "commands/bench.h"

namespace ipex::commands {

// Upper bound on --streams (each is a thread with its own OpenMP team).
constexpr int64_t kMaxStreams = 1024;

struct StreamsBenchReport {
    std::string model, dtype, inputs;
    int64_t streams = 0, batch = 1, warmup = 0;
    std::vector<std::string> stream_cpus;  // each stream's CPUs, "0-3"
    std::vector<int64_t> requests;         // timed requests per stream
    struct Seen {
        std::string cpus;  // the CPUs its thread was allowed at the end, read from inside it
        int threads = 0;   // its OpenMP team size then
    };
    std::vector<Seen> seen;                // per stream
    double wall_s = 0;                     // from the timed start to the last stream's end
    double throughput_per_s = 0;           // samples (batch x requests) per second of wall time
    bench::LatencyStats latency;           // per request, all streams
    double peak_rss_mb = 0;

    nlohmann::json to_json() const;
    nlohmann::json stream_threads_json() const;
    std::string text() const;
    void check() const {}
};

// Loads the model and its inputs (exit 2/3 before any timing); --iterations is per stream, a
// --duration bounds every stream's timed requests. Exit 2 unless 1 <= streams <= the process's
// CPUs (and kMaxStreams).
StreamsBenchReport run_bench_streams(const BenchRequest &request, int64_t streams);

}  // namespace ipex::commands
