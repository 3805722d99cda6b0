// Per-op profile of a TorchScript forward: where each iteration's time goes, op kind by op
// kind, with the FLOPs, GFLOP/s and share of the measured peak of the compute ops
// (bench/op_flops.h) and the time of everything else. Ops are seen through libtorch's
// RecordFunction callbacks on the calling thread; only top-level ops count (the aten calls an
// ipex op or aten::linear makes inside are part of their caller's time), and the callbacks'
// own time between ops is measured and taken out of the forward's time.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/machine_limits.h"
#include "bench/op_flops.h"

namespace ipex::bench {

// One compute op name and dtype, or one other op name, summed over the profiled iterations.
struct ProfileRow {
    std::string op;     // "ipex::convolution", "aten::add_", or kBetweenOps
    std::string dtype;  // the math's dtype for compute ops, the first input's otherwise (or kMixedDtypes)
    std::string layer;  // by-layer profiles: the op's signature (bench/op_flops.h op_signature)
    OpKind kind = OpKind::kOther;
    int64_t calls = 0;
    double total_ms = 0;
    int64_t flops = 0;  // compute ops: the analytic count over all calls
};

// The dtype of an other-op row whose calls saw several.
constexpr const char *kMixedDtypes = "mixed";

// The row for the forward's time outside any recorded op (the interpreter, prim ops).
constexpr const char *kBetweenOps = "(between ops)";

struct Profile {
    int iterations = 0;
    bool by_layer = false;           // one row per op, dtype and signature
    double forward_ms = 0;           // sum over iterations, callbacks' own time taken out
    double callback_ms = 0;          // the time taken out
    double unprofiled_median_ms = 0; // the same forward timed without callbacks (0: not timed)
    std::vector<ProfileRow> rows;    // by total time, descending; kBetweenOps included

    double compute_ms() const;  // rows of a compute kind
    // Whether a compute row ran faster than its measured peak (the limits were measured while
    // the host was slower than during the profile).
    bool exceeds_peak(const MachineLimits &limits) const;
    int64_t compute_flops() const;

    // {"iterations", "forward_ms", "unprofiled_median_ms", "callback_ms", "rows": [...],
    //  "totals": {...}} with per-iteration figures; see man ipex-tool(1), BENCH.
    nlohmann::json to_json(const MachineLimits &limits) const;
    // The table `ipex-tool bench --profile` prints.
    std::string table(const MachineLimits &limits) const;
};

// Runs `run` `iterations` times (>= 1) with the op callbacks on and returns the profile; with
// `by_layer`, ops of one name and dtype get a row per signature (shapes, weight, stride...).
Profile profile_runs(const RunFn &run, int iterations, bool by_layer = false);

}  // namespace ipex::bench
