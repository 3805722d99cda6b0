#include <gtest/gtest.h>

#include <cmath>

#include "bench/machine_limits.h"
#include "base/cpu_features.h"

namespace {

// Short budgets: the figures only need to be plausible here, not precise.
constexpr double kTestBudgetSeconds = 0.5;

void expect_positive_finite(double v, const char *what) {
    EXPECT_TRUE(std::isfinite(v)) << what;
    EXPECT_GT(v, 0) << what;
}

}  // namespace

TEST(MachineLimits, PositiveAndFiniteOnThisMachine) {
    const auto m = ipex::bench::measure_machine_limits(1, kTestBudgetSeconds);
    const auto &cpu = ipex::cpu_features();
    if (cpu.avx512f || cpu.avx2) expect_positive_finite(m.fp32_fma_gflops, "fp32_fma_gflops");
    if (cpu.avx512_bf16) expect_positive_finite(m.bf16_dot_gflops, "bf16_dot_gflops");
    else EXPECT_EQ(m.bf16_dot_gflops, 0);
    if (cpu.avx512_vnni) expect_positive_finite(m.int8_vnni_gops, "int8_vnni_gops");
    else EXPECT_EQ(m.int8_vnni_gops, 0);
    expect_positive_finite(m.read_gbs, "read_gbs");
    EXPECT_GT(m.read_buffer_mib, 32);
    // Sanity bounds for one core of any current CPU: below 10 TFLOP/s and 1 TB/s.
    EXPECT_LT(m.fp32_fma_gflops, 10000);
    EXPECT_LT(m.read_gbs, 1000);
    EXPECT_LT(m.seconds, 10 * kTestBudgetSeconds + 2);
}

TEST(MachineLimits, Bf16DotPeakAboveFp32FmaPeak) {
    if (!ipex::cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
    const auto m = ipex::bench::measure_machine_limits(1, kTestBudgetSeconds);
    // VDPBF16PS does twice the FLOPs of VFMADD231PS at the same throughput.
    EXPECT_GT(m.bf16_dot_gflops, m.fp32_fma_gflops);
}

TEST(MachineLimits, ThreadsHonoured) {
    for (int threads : {1, 2}) {
        const auto m = ipex::bench::measure_machine_limits(threads, kTestBudgetSeconds);
        EXPECT_EQ(m.threads, threads);
        EXPECT_EQ(m.to_json()["threads"].get<int>(), threads);
    }
}

TEST(MachineLimits, JsonKeysAndPeakLookup) {
    ipex::bench::MachineLimits m;
    m.threads = 2;
    m.bf16_dot_gflops = 400;
    m.fp32_fma_gflops = 200;
    m.read_gbs = 30;
    const auto j = m.to_json();
    for (const char *key : {"threads", "bf16_dot_gflops", "fp32_fma_gflops", "int8_vnni_gops", "read_gbs"})
        EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_TRUE(j["int8_vnni_gops"].is_null());
    EXPECT_EQ(m.peak_for("bf16"), 400);
    EXPECT_EQ(m.peak_for("bf32"), 400);
    EXPECT_EQ(m.peak_for("fp32"), 200);
    EXPECT_EQ(m.peak_for("int8"), 0);
    EXPECT_EQ(m.peak_for("fp16"), 0);
}
