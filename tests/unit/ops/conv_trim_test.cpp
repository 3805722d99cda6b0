// Convolutions whose outer taps only ever read padding (conv_trim.cpp): the live taps against a
// brute-force count over random geometries; contexts that cut them (DeepLab's ASPP shape: a
// dilation larger than the map, only the center tap left; cuts along one dim only; 1-D and 3-D)
// against fp64 aten convolutions with post-ops, a residual sum and run_into, while larger inputs
// to the same context keep every tap; FLOPs count the taps computed; transposed convolutions and
// asymmetric cuts are never cut; convolutions no size can cut keep no cache; the last 16 input
// sizes are kept; concurrent first calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <thread>

#include "ops/conv_context.h"
#include "unit/ops/ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using testing::expect_close;

ConvParams params(std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                  bool transposed = false) {
    return ConvParams{std::move(stride), std::move(padding), std::move(dilation), {}, 1, transposed};
}

TEST(LiveTaps, MatchBruteForceOverRandomGeometries) {
    std::mt19937 rng(7);
    const auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    int cut = 0;
    for (int trial = 0; trial < 4000; ++trial) {
        const int64_t k = pick(1, 6), d = pick(1, 8), s = pick(1, 3), pad = pick(0, 14), in = pick(1, 24);
        const ConvParams p = params({s}, {pad}, {d});
        const LiveTaps live = live_taps(p, {2, 2, k}, {1, 2, in});
        const int64_t out = (in + 2 * pad - d * (k - 1) - 1) / s + 1;
        std::ostringstream what;
        what << "k" << k << " d" << d << " s" << s << " p" << pad << " in" << in;
        if (in + 2 * pad - d * (k - 1) - 1 < 0) {
            EXPECT_TRUE(live.lo.empty()) << what.str();
            continue;
        }
        ASSERT_EQ(live.lo.size(), 1u) << what.str();
        std::vector<bool> reads(k, false);
        for (int64_t t = 0; t < k; ++t)
            for (int64_t o = 0; o < out; ++o) {
                const int64_t at = o * s - pad + t * d;
                if (at >= 0 && at < in) reads[t] = true;
            }
        // [lo, hi) spans the first to the last tap that reads the image (with a stride above 1,
        // a tap between them may read padding only: it stays).
        int64_t first = k, last = -1;
        for (int64_t t = 0; t < k; ++t)
            if (reads[t]) first = std::min(first, t), last = t;
        if (last < 0) {  // no tap reads the image (the outputs are the bias): an empty range, no cut
            EXPECT_EQ(live.lo[0], live.hi[0]) << what.str();
            EXPECT_FALSE(live.cuts({2, 2, k}, p)) << what.str();
            continue;
        }
        EXPECT_EQ(live.lo[0], first) << what.str();
        EXPECT_EQ(live.hi[0], last + 1) << what.str();
        const bool cuts = live.cuts({2, 2, k}, p);
        // The rule that spares a context its trim cache never misses a cut.
        if (cuts) EXPECT_TRUE(k > 1 && pad >= d) << what.str();
        cut += cuts;
    }
    EXPECT_GT(cut, 100);  // the trials reach the cutting case often
}

// The ASPP shape: 3x3 at dilation 12 on maps of 10x10 reads the image with its center tap only.
TEST(ConvTrim, DilationBeyondTheMapLeavesTheCenterTap) {
    at::manual_seed(0);
    const at::Tensor w = at::randn({8, 6, 3, 3}) * 0.3, b = at::randn({8});
    const ConvParams p = params({1, 1}, {12, 12}, {12, 12});
    ConvolutionContext ctx(w, b, p, "fp32", {{"relu"}}, false, {});
    const at::Tensor x = at::randn({2, 6, 10, 10});
    const auto trimmed = ctx.trimmed_for(x.sizes());
    ASSERT_NE(trimmed, nullptr);
    EXPECT_EQ(trimmed->weight_sizes(), at::IntArrayRef({8, 6, 1, 1}));
    EXPECT_EQ(trimmed->params().padding, std::vector<int64_t>({0, 0}));
    EXPECT_EQ(trimmed->params().dilation, std::vector<int64_t>({1, 1}));
    EXPECT_EQ(ctx.trimmed_for(x.sizes()), trimmed);  // made once per size
    const at::Tensor want = at::relu(testing::reference_conv(x, w, b, p));
    const at::Tensor got = ctx.run(x, c10::nullopt);
    EXPECT_TRUE(testing::channels_last(got));
    expect_close(got, want, "fp32", "dilation 12 on 10x10");
    expect_close(ctx.run(x[0], c10::nullopt), want[0], "fp32", "unbatched");
    EXPECT_EQ(ctx.flops(x.sizes()), 2 * 2 * 10 * 10 * 8 * 6);  // one tap computed
    // A larger map reads every tap: the whole kernel runs.
    const at::Tensor large = at::randn({1, 6, 30, 30});
    EXPECT_EQ(ctx.trimmed_for(large.sizes()), nullptr);
    expect_close(ctx.run(large, c10::nullopt), at::relu(testing::reference_conv(large, w, b, p)), "fp32", "30x30");
    EXPECT_EQ(ctx.flops(large.sizes()), 2 * 30 * 30 * 8 * 6 * 9);
}

TEST(ConvTrim, Bf16Context) {
    IPEX_SKIP_WITHOUT_ONEDNN_DTYPE("bf16");
    at::manual_seed(1);
    const at::Tensor w = (at::randn({16, 8, 3, 3}) * 0.3).to(at::kBFloat16);
    const ConvParams p = params({1, 1}, {24, 24}, {24, 24});
    ConvolutionContext ctx(w, c10::nullopt, p, "bf16", {}, false, {});
    const at::Tensor x = at::randn({1, 8, 20, 20}).to(at::kBFloat16);
    ASSERT_NE(ctx.trimmed_for(x.sizes()), nullptr);
    expect_close(ctx.run(x, c10::nullopt), testing::reference_conv(x, w, at::Tensor(), p), "bf16", "bf16");
}

// Rows lose their outer taps, columns keep all: a 5x5 kernel cut to 3x5, the row padding reduced.
TEST(ConvTrim, CutAlongOneDim) {
    at::manual_seed(2);
    const at::Tensor w = at::randn({4, 3, 5, 5}) * 0.3, b = at::randn({4});
    const ConvParams p = params({1, 1}, {8, 8}, {4, 4});
    ConvolutionContext ctx(w, b, p, "fp32", {{"clip", 0.0, 6.0}}, false, {});
    const at::Tensor x = at::randn({2, 3, 6, 12});
    const auto trimmed = ctx.trimmed_for(x.sizes());
    ASSERT_NE(trimmed, nullptr);
    EXPECT_EQ(trimmed->weight_sizes(), at::IntArrayRef({4, 3, 3, 5}));
    EXPECT_EQ(trimmed->params().padding, std::vector<int64_t>({4, 8}));
    EXPECT_EQ(trimmed->params().dilation, std::vector<int64_t>({4, 4}));
    const at::Tensor want = at::clamp(testing::reference_conv(x, w, b, p), 0.0, 6.0);
    expect_close(ctx.run(x, c10::nullopt), want, "fp32", "5x5 -> 3x5");
}

// The residual sum and run_into go through the trimmed context too.
TEST(ConvTrim, SumAndRunInto) {
    at::manual_seed(3);
    const at::Tensor w = at::randn({8, 8, 3, 3}) * 0.3, b = at::randn({8});
    const ConvParams p = params({1, 1}, {18, 18}, {18, 18});
    const at::Tensor x = at::randn({2, 8, 9, 11}), other = at::randn({2, 8, 9, 11});
    ConvolutionContext summed(w, b, p, "fp32", {{"sum", 0.5}, {"relu"}}, false, {});
    ASSERT_NE(summed.trimmed_for(x.sizes()), nullptr);
    const at::Tensor want_sum = at::relu(testing::reference_conv(x, w, b, p) + 0.5 * other.to(at::kDouble));
    const at::Tensor o = other.clone();
    expect_close(summed.run(x, o), want_sum, "fp32", "sum");
    EXPECT_TRUE(at::equal(o, other));  // not written in place: the context was built without it
    ConvolutionContext plain(w, b, p, "fp32", {}, false, {});
    const at::Tensor out = at::empty({2, 8, 9, 11}).contiguous(at::MemoryFormat::ChannelsLast);
    plain.run_into(testing::as_channels_last(x), out);
    expect_close(out, testing::reference_conv(x, w, b, p), "fp32", "run_into");
}

TEST(ConvTrim, OneAndThreeDims) {
    at::manual_seed(4);
    const at::Tensor w1 = at::randn({5, 4, 3}) * 0.3;
    const ConvParams p1 = params({1}, {9}, {9});
    ConvolutionContext c1(w1, c10::nullopt, p1, "fp32", {}, false, {});
    const at::Tensor x1 = at::randn({2, 4, 7});
    ASSERT_NE(c1.trimmed_for(x1.sizes()), nullptr);
    expect_close(c1.run(x1, c10::nullopt), testing::reference_conv(x1, w1, at::Tensor(), p1), "fp32", "1-D");
    const at::Tensor w3 = at::randn({4, 3, 3, 3, 3}) * 0.3;
    const ConvParams p3 = params({1, 1, 1}, {6, 1, 6}, {6, 1, 6});
    ConvolutionContext c3(w3, c10::nullopt, p3, "fp32", {}, false, {});
    const at::Tensor x3 = at::randn({1, 3, 5, 6, 4});
    const auto t3 = c3.trimmed_for(x3.sizes());
    ASSERT_NE(t3, nullptr);
    EXPECT_EQ(t3->weight_sizes(), at::IntArrayRef({4, 3, 1, 3, 1}));
    expect_close(c3.run(x3, c10::nullopt), testing::reference_conv(x3, w3, at::Tensor(), p3), "fp32", "3-D");
}

TEST(ConvTrim, NeverCut) {
    // Transposed: every input position meets the whole weight.
    const ConvParams t = params({2, 2}, {12, 12}, {12, 12}, true);
    ConvolutionContext up(at::randn({4, 6, 3, 3}), c10::nullopt, t, "fp32", {}, false, {});
    EXPECT_EQ(up.trimmed_for({1, 4, 20, 20}), nullptr);
    // Stride 3 over 6 positions at dilation 5, padding 5: two outputs; tap 0 reads -5 and -2
    // (dead), taps 1 and 2 read the image. One side only: kept whole (one padding per dim).
    const ConvParams s = params({3, 3}, {5, 5}, {5, 5});
    const LiveTaps live = live_taps(s, {4, 4, 3, 3}, {1, 4, 6, 6});
    ASSERT_EQ(live.lo, std::vector<int64_t>({1, 1}));
    ASSERT_EQ(live.hi, std::vector<int64_t>({3, 3}));
    EXPECT_FALSE(live.cuts({4, 4, 3, 3}, s));
    const at::Tensor w = at::randn({4, 4, 3, 3});
    ConvolutionContext ctx(w, c10::nullopt, s, "fp32", {}, false, {});
    const at::Tensor x = at::randn({1, 4, 6, 6});
    EXPECT_EQ(ctx.trimmed_for(x.sizes()), nullptr);
    expect_close(ctx.run(x, c10::nullopt), testing::reference_conv(x, w, at::Tensor(), s), "fp32", "one side");
    // Every tap live.
    ConvolutionContext same(at::randn({4, 4, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}), "fp32", {},
                            false, {});
    EXPECT_EQ(same.trimmed_for({1, 4, 8, 8}), nullptr);
}

// A convolution no input size can cut (no padding, or less than a dilation, or 1x1 taps)
// keeps no trim cache: its calls take no lock and record no size.
TEST(ConvTrim, UncuttableConvolutionsKeepNoCache) {
    at::manual_seed(8);
    const at::Tensor x = at::randn({1, 4, 3, 3});
    const std::vector<std::pair<std::vector<int64_t>, ConvParams>> cases = {
        {{4, 4, 3, 3}, params({1, 1}, {0, 0}, {1, 1})},
        {{4, 4, 3, 3}, params({1, 1}, {1, 1}, {2, 2})},
        {{4, 4, 1, 1}, params({1, 1}, {3, 3}, {1, 1})}};
    for (const auto &[sizes, p] : cases) {
        const at::Tensor w = at::randn(sizes) * 0.3;
        ConvolutionContext ctx(w, c10::nullopt, p, "fp32", {}, false, {});
        expect_close(ctx.run(x, c10::nullopt), testing::reference_conv(x, w, at::Tensor(), p), "fp32", "uncut");
        EXPECT_EQ(ctx.trimmed_for(x.sizes()), nullptr);
        EXPECT_EQ(ctx.trim_sizes(), 0u);
    }
    // Padding of one dilation on a 1x1 map: the outer taps are cut and the size is kept.
    const at::Tensor w = at::randn({4, 4, 3, 3}) * 0.3;
    const ConvParams p = params({1, 1}, {2, 2}, {2, 2});
    ConvolutionContext ctx(w, c10::nullopt, p, "fp32", {}, false, {});
    const at::Tensor one = at::randn({1, 4, 1, 1});
    expect_close(ctx.run(one, c10::nullopt), testing::reference_conv(one, w, at::Tensor(), p), "fp32", "cut");
    EXPECT_EQ(ctx.trim_sizes(), 1u);
}

// Many input sizes: the last kMaxTrimSizes are kept, a dropped one is made again, results hold.
TEST(ConvTrim, KeepsTheLastSizes) {
    at::manual_seed(6);
    const at::Tensor w = at::randn({4, 4, 3, 3}) * 0.3;
    const ConvParams p = params({1, 1}, {20, 20}, {20, 20});
    ConvolutionContext ctx(w, c10::nullopt, p, "fp32", {}, false, {});
    const auto first = ctx.trimmed_for({1, 4, 3, 3});
    ASSERT_NE(first, nullptr);
    for (int64_t size = 4; size < 4 + static_cast<int64_t>(ConvolutionContext::kMaxTrimSizes) + 4; ++size) {
        const at::Tensor x = at::randn({1, 4, size, 5});
        expect_close(ctx.run(x, c10::nullopt), testing::reference_conv(x, w, at::Tensor(), p), "fp32", "sizes");
        EXPECT_LE(ctx.trim_sizes(), ConvolutionContext::kMaxTrimSizes);
    }
    EXPECT_EQ(ctx.trim_sizes(), ConvolutionContext::kMaxTrimSizes);
    const auto again = ctx.trimmed_for({1, 4, 3, 3});  // dropped, made anew; the old one still alive
    ASSERT_NE(again, nullptr);
    EXPECT_NE(again.get(), first.get());
    EXPECT_EQ(first->weight_sizes(), again->weight_sizes());
}

TEST(ConvTrim, ConcurrentFirstCalls) {
    at::manual_seed(5);
    const at::Tensor w = at::randn({8, 8, 3, 3}) * 0.3;
    const ConvParams p = params({1, 1}, {16, 16}, {16, 16});
    ConvolutionContext ctx(w, c10::nullopt, p, "fp32", {}, false, {});
    const at::Tensor x = at::randn({1, 8, 12, 12});
    const at::Tensor want = testing::reference_conv(x, w, at::Tensor(), p);
    std::vector<at::Tensor> got(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { got[i] = ctx.run(x, c10::nullopt); });
    for (auto &t : threads) t.join();
    for (const at::Tensor &g : got) expect_close(g, want, "fp32", "concurrent");
}

}  // namespace
}  // namespace ipex::ops
