// The machine's limits, measured in this process: the compute peaks of the dot-product and
// FMA instructions the heavy ops run on, and the memory read bandwidth. "% of peak" and
// "x the bandwidth floor" figures are computed against these, measured in the same run on
// the same host (the hosts of a VM differ from day to day by 2x and more).
//   bf16_dot_gflops  VDPBF16PS on zmm (64 FLOP each), 0 without AVX512-BF16
//   fp32_fma_gflops  VFMADD231PS on zmm (32 FLOP each); ymm (16) on AVX2-only CPUs; 0 without FMA
//   int8_vnni_gops   VPDPBUSD on zmm (128 int8 ops each: 64 multiplies, 64 adds), 0 without AVX512-VNNI
//   read_gbs         a sum over a buffer many times the last-level cache (AVX-512, else AVX2 loads)
// Each peak is the best of short repetitions of a register-only loop with independent
// accumulators per thread (as many as the registers hold beside the operands), run on
// `threads` OpenMP threads. Every kernel is compiled for its own ISA and runs only after the
// cpuid check, so this never raises SIGILL.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ipex::bench {

struct MachineLimits {
    int threads = 0;             // threads every figure was measured on
    double bf16_dot_gflops = 0;
    double fp32_fma_gflops = 0;
    double int8_vnni_gops = 0;
    double read_gbs = 0;
    double read_buffer_mib = 0;  // the buffer read_gbs was measured on
    double seconds = 0;          // what the measurement cost

    // {"threads", "bf16_dot_gflops", "fp32_fma_gflops", "int8_vnni_gops", "read_gbs",
    //  "read_buffer_mib", "seconds"}; a peak the CPU lacks the instruction for is null.
    nlohmann::json to_json() const;
    // The compute peak (GFLOP/s, GOP/s for int8) for a profile dtype: "bf16" (also bf32),
    // "fp32", "int8"; 0 when not measured or not known (fp16).
    double peak_for(const std::string &dtype) const;
};

// A peak as printed: "456.2 GFLOP/s", or "absent (no avx512_bf16)" for 0 (the CPU lacks the
// instruction; "absent" alone without `missing_isa`).
std::string peak_text(double value, const char *unit, const char *missing_isa = nullptr);

// Each figure the higher of the two (the same threads): a measurement only errs low.
MachineLimits best_of(const MachineLimits &a, const MachineLimits &b);

// Measures on `threads` threads (>= 1) in about `seconds_budget` seconds (0.5-2 is sensible).
MachineLimits measure_machine_limits(int threads, double seconds_budget = 1.5);

}  // namespace ipex::bench
