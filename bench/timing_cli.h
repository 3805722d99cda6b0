// The options every C++ program in bench/ shares: --iterations, --warmup, --threads, and what
// they set (the intra-op threads, the harness's TimingOptions).
#pragma once

#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include "bench/harness.h"
#include "core/system_info.h"

namespace ipex::bench {

struct TimingCli {
    int iterations;
    int warmup;
    int threads = 0;  // 0: OMP_NUM_THREADS, else the physical cores this process may use

    TimingCli(int default_iterations, int default_warmup) : iterations(default_iterations), warmup(default_warmup) {}

    void add_to(CLI::App &app) {
        app.add_option("--iterations", iterations, "timed rounds")->capture_default_str()->check(CLI::PositiveNumber);
        app.add_option("--warmup", warmup, "untimed rounds")->capture_default_str()->check(CLI::NonNegativeNumber);
        app.add_option("--threads", threads,
                       "intra-op threads (default: OMP_NUM_THREADS, else the physical cores this process may use)")
            ->check(CLI::NonNegativeNumber);
    }

    // Call after parsing: sets the intra-op threads.
    void apply_threads() const { at::set_num_threads(threads > 0 ? threads : ipex::default_threads()); }

    TimingOptions timing() const {
        TimingOptions o;
        o.iterations = iterations;
        o.warmup = warmup;
        return o;
    }
};

}  // namespace ipex::bench
