#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "bench/harness.h"

TEST(Harness, SummaryMatchesNaiveStatistics) {
    std::mt19937 rng(3);
    std::vector<double> ms(101);
    for (auto &v : ms) v = std::uniform_real_distribution<double>(1.0, 9.0)(rng);
    const auto s = ipex::bench::summarize(ms, {50, 90, 99});
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_DOUBLE_EQ(s.min, sorted.front());
    EXPECT_DOUBLE_EQ(s.max, sorted.back());
    EXPECT_DOUBLE_EQ(s.median, sorted[50]);
    EXPECT_NEAR(s.mean, std::accumulate(ms.begin(), ms.end(), 0.0) / 101.0, 1e-12);
    EXPECT_DOUBLE_EQ(s.percentiles.at(90), sorted[90]);   // ceil(0.9*101) = 91st value
    EXPECT_DOUBLE_EQ(s.percentiles.at(99), sorted[99]);   // ceil(0.99*101) = 100th value
    EXPECT_DOUBLE_EQ(s.percentiles.at(50), sorted[50]);
    const auto even = ipex::bench::summarize({4, 1, 3, 2}, {50});
    EXPECT_DOUBLE_EQ(even.median, 2.5);
}

TEST(Harness, InterleavesBaselineAndCandidate) {
    std::string order;
    ipex::bench::RunFn cand = [&] { order += 'A'; };
    ipex::bench::RunFn base = [&] { order += 'B'; };
    ipex::bench::TimingOptions opt;
    opt.warmup = 1;
    opt.iterations = 4;
    const auto r = ipex::bench::time_interleaved(cand, &base, opt);
    EXPECT_EQ(order, "AB" "AB" "BA" "AB" "BA");  // warmup, then alternating order
    EXPECT_EQ(r.iterations, 4);
    ASSERT_TRUE(r.baseline);
    EXPECT_EQ(r.baseline->samples, 4u);
    EXPECT_TRUE(r.ratio().has_value());
    const auto alone = ipex::bench::time_interleaved(cand, nullptr, opt);
    EXPECT_FALSE(alone.ratio().has_value());
}

TEST(Harness, CapturesStdout) {
    const std::string text = ipex::bench::capture_stdout([] { std::printf("captured %d\n", 42); });
    EXPECT_EQ(text, "captured 42\n");
}
