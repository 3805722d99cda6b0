// oneDNN's Winograd convolution as a ConvolutionContext's kernel choice (conv_own_plans.h,
// conv_winograd.cpp): which convolutions plan it, its results against an fp64 aten reference
// over channel counts (16k and not), image sizes around the 2x2 / 4x4 tiles, padding 0-2,
// batches, bias or none, relu, a residual sum in place and into a copy; its agreement with the
// direct kernel; many input sizes and the weight copies they make; the timed and recorded
// choices; the variable that turns it off.
#include <gtest/gtest.h>

#include <sstream>

#include "ops/conv_context.h"
#include "ops/own_kernels.h"
#include "unit/ops/ops_test_utils.h"

namespace ipex::ops {
namespace {

using testing::KernelChoice;
using testing::reference_post_ops;

class WinogradSetting : public testing::ScopedEnv {
public:
    explicit WinogradSetting(const char *value) : ScopedEnv("IPEX_CONV_WINOGRAD", value) {}
};

bool avx512() { return own_kernels::available(false); }

struct Case {
    int64_t n, in, out, h, w, padding;
    bool bias;
};

std::string describe(const Case &c, const PostOps &post) {
    std::ostringstream out;
    out << c.n << "x" << c.in << "x" << c.h << "x" << c.w << " ->" << c.out << " p" << c.padding
        << (c.bias ? " bias +" : " +") << ops::describe(post);
    return out.str();
}

ConvParams params_of(const Case &c, std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> dilation = {1, 1}) {
    return ConvParams{stride, {c.padding, c.padding}, dilation, {0, 0}, 1, false};
}

struct Built {
    at::Tensor weight, bias;
    std::unique_ptr<ConvolutionContext> ctx;
};

Built build(const Case &c, const PostOps &post, bool sum_in_place = false) {
    Built b;
    b.weight = at::randn({c.out, c.in, 3, 3}) * (1.0 / std::sqrt(9.0 * c.in));
    if (c.bias) b.bias = at::randn({c.out});
    b.ctx = std::make_unique<ConvolutionContext>(
        b.weight, b.bias.defined() ? c10::optional<at::Tensor>(b.bias) : c10::nullopt, params_of(c), "fp32", post,
        sum_in_place, std::vector<int64_t>{});
    return b;
}

// Within 1e-5 of the output's largest value everywhere: Winograd's tile transforms in fp32 lose
// a few bits against the direct sums (measured: up to 2e-6 over these cases).
void expect_close(const at::Tensor &got, const at::Tensor &want, const std::string &what) {
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    EXPECT_LE(testing::max_relative_error(got, want), 1e-5) << what;
    EXPECT_FALSE(got.isnan().any().item<bool>()) << what;
}

std::vector<Case> cases() {
    return {
        {1, 64, 64, 56, 56, 1, true},    // ResNet-50's first stage
        {2, 128, 128, 28, 28, 1, true},  // its second, two images
        {1, 256, 256, 14, 14, 1, false},
        {3, 512, 512, 7, 7, 1, true},    // its last, three images
        {1, 32, 48, 13, 29, 1, true},    // tails of the tiles in both dims, outputs not 16k x 2
        {2, 16, 16, 9, 10, 0, true},     // no padding
        {1, 48, 32, 11, 6, 2, false},    // padding 2
        {1, 24, 40, 8, 8, 1, true},      // channels not a multiple of 16
        {1, 3, 16, 12, 12, 1, true},     // three input channels
        {1, 16, 16, 1, 1, 1, true},      // one pixel (the taps but the centre read padding)
    };
}

TEST(Winograd, PlannedForDenseStrideOne3x3Fp32) {
    if (!avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 only";
    KernelChoice env("1");
    const auto has = [](std::vector<int64_t> w, const std::string &dtype, PostOps post = {},
                        std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> dilation = {1, 1},
                        int64_t groups = 1, bool transposed = false) {
        const std::vector<int64_t> zeros(stride.size(), 0), ones(stride.size(), 1);
        const ConvParams p{stride, ones, dilation, zeros, groups, transposed};
        return ConvolutionContext(at::randn(w), c10::nullopt, p, dtype, std::move(post), false, {})
            .has_winograd_kernel();
    };
    EXPECT_TRUE(has({64, 64, 3, 3}, "fp32"));
    EXPECT_TRUE(has({64, 64, 3, 3}, "fp32", {{"relu"}}));
    EXPECT_TRUE(has({64, 64, 3, 3}, "fp32", {{"sum", 1.0}, {"relu"}}));
    EXPECT_FALSE(has({64, 64, 3, 3}, "bf16"));
    EXPECT_FALSE(has({64, 64, 3, 3}, "bf32"));
    EXPECT_FALSE(has({64, 64, 3, 3}, "fp32", {{"silu"}}));              // a post-op its kernels lack
    EXPECT_FALSE(has({64, 64, 3, 3}, "fp32", {{"leaky_relu", 0.1}}));   // relu with a slope
    EXPECT_FALSE(has({64, 64, 3, 3}, "fp32", {}, {2, 2}));              // stride 2
    EXPECT_FALSE(has({64, 64, 3, 3}, "fp32", {}, {1, 1}, {2, 2}));      // dilated
    EXPECT_FALSE(has({64, 32, 3, 3}, "fp32", {}, {1, 1}, {1, 1}, 2));   // grouped
    EXPECT_FALSE(has({64, 64, 5, 5}, "fp32"));
    EXPECT_FALSE(has({64, 64, 1, 1}, "fp32"));
    EXPECT_FALSE(has({64, 64, 3}, "fp32", {}, {1}, {1}));               // 1-D
    EXPECT_FALSE(has({64, 64, 3, 3}, "fp32", {}, {1, 1}, {1, 1}, 1, true));  // transposed
    {
        WinogradSetting off("0");
        EXPECT_FALSE(has({64, 64, 3, 3}, "fp32"));
    }
    {
        KernelChoice onednn("0");
        EXPECT_FALSE(has({64, 64, 3, 3}, "fp32"));
    }
    WinogradSetting bad("yes");
    EXPECT_THROW(has({64, 64, 3, 3}, "fp32"), c10::Error);
}

TEST(Winograd, MatchesTheFp64ReferenceOverShapes) {
    if (!avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 only";
    at::manual_seed(0);
    KernelChoice env("1");
    int taken = 0;
    for (const Case &c : cases()) {
        for (const PostOps &post : {PostOps{}, PostOps{{"relu"}}}) {
            const std::string what = describe(c, post);
            const Built b = build(c, post);
            ASSERT_TRUE(b.ctx->has_winograd_kernel()) << what;
            const at::Tensor x = at::randn({c.n, c.in, c.h, c.w});
            taken += b.ctx->winograd_takes(x.sizes().vec());
            const at::Tensor got = b.ctx->run(testing::as_channels_last(x), c10::nullopt);
            EXPECT_TRUE(testing::channels_last(got)) << what;
            const at::Tensor conv = testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c));
            expect_close(got, reference_post_ops(conv, post), what);
        }
    }
    // ResNet's layers and the 16k-channel ones at least; oneDNN may leave others to the direct kernel.
    EXPECT_GE(taken, 2 * 7);
    const Built resnet = build(cases()[0], {});
    EXPECT_TRUE(resnet.ctx->winograd_takes({1, 64, 56, 56}));
    EXPECT_FALSE(resnet.ctx->winograd_takes({1, 64, 56}));  // not 4-D
}

// Fed 40 input sizes, a context keeps at most two Winograd copies of its weight (oneDNN blocks
// them by the shape): the sizes that would need another run the direct kernel, every result
// the convolution.
TEST(Winograd, ManySizesKeepTwoWeightCopies) {
    if (!avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 only";
    at::manual_seed(2);
    KernelChoice env("1");
    const Case c{1, 64, 64, 0, 0, 1, true};
    const Built b = build(c, {});
    EXPECT_EQ(b.ctx->winograd_layouts(), 0u) << "packed before any call";
    int taken = 0, direct = 0;
    for (int64_t i = 1; i <= 40; ++i) {
        const int64_t h = (i * 7) % 37 + 3, w = (i * 11) % 31 + 3;
        const at::Tensor x = at::randn({1 + i % 2, 64, h, w});
        (b.ctx->winograd_takes(x.sizes().vec()) ? taken : direct) += 1;
        const at::Tensor conv = testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c));
        expect_close(b.ctx->run(x, c10::nullopt), conv, "size " + std::to_string(h) + "x" + std::to_string(w));
        EXPECT_LE(b.ctx->winograd_layouts(), 2u);
    }
    EXPECT_GE(taken, 1);
    EXPECT_GE(b.ctx->winograd_layouts(), 1u);
    EXPECT_LE(b.ctx->packed_layouts(), 2u) << "the direct kernel's copies";
}

// Timing at optimize time a shape the Winograd kernel does not take (a third weight layout)
// records the direct kernel without running the other, and the shape runs the convolution.
TEST(Winograd, ChoosingAShapeItDoesNotTakeRecordsTheDirectKernel) {
    if (!avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 only";
    at::manual_seed(6);
    KernelChoice env(nullptr);
    const Case c{1, 64, 64, 0, 0, 1, true};
    Built b = build(c, {});
    std::vector<int64_t> untaken;
    for (int64_t i = 1; i <= 40 && untaken.empty(); ++i) {
        const std::vector<int64_t> sizes{1 + i % 2, 64, (i * 7) % 37 + 3, (i * 11) % 31 + 3};
        if (!b.ctx->winograd_takes(sizes)) untaken = sizes;
    }
    ASSERT_FALSE(untaken.empty()) << "every size took the kernel";
    const auto chosen = b.ctx->choose_kernel(untaken, 2);
    EXPECT_FALSE(chosen.own);
    ASSERT_EQ(b.ctx->recorded_kernels().size(), 1u);
    EXPECT_FALSE(b.ctx->recorded_kernels()[0].second);
    const at::Tensor x = at::randn(untaken);
    const at::Tensor conv = testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c));
    expect_close(b.ctx->run(x, c10::nullopt), conv, "the untaken size");
}

// A residual sum (ResNet basic blocks: conv + identity, then relu) written into the summand and
// into a copy, scaled; the caller's summand kept where the op may not write it.
TEST(Winograd, ResidualSumInPlaceAndIntoACopy) {
    if (!avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 only";
    at::manual_seed(1);
    KernelChoice env("1");
    for (const auto &[c, post] : std::vector<std::pair<Case, PostOps>>{
             {cases()[1], {{"sum", 1.0}, {"relu"}}}, {cases()[4], {{"sum", 0.5}}}}) {
        const std::string what = describe(c, post);
        const Built b = build(c, post, /*sum_in_place=*/true);
        const at::Tensor x = at::randn({c.n, c.in, c.h, c.w});
        ASSERT_TRUE(b.ctx->winograd_takes(x.sizes().vec())) << what;
        const at::Tensor conv = testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c));
        testing::expect_sum_into_copy_and_in_place(*b.ctx, x, conv, post, what, expect_close);
    }
}

// The Winograd and direct kernels give the same convolution within 1e-5 of each other, and the
// NCHW and unbatched inputs the op converts first come out the same.
TEST(Winograd, AgreesWithTheDirectKernel) {
    if (!avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 only";
    const Case c = cases()[1];
    const at::Tensor x = at::randn({c.n, c.in, c.h, c.w});
    at::Tensor results[2];
    for (int own = 0; own < 2; ++own) {
        KernelChoice env(own ? "1" : "0");
        at::manual_seed(3);
        const Built b = build(c, {{"relu"}});
        ASSERT_EQ(b.ctx->has_winograd_kernel(), own == 1);
        results[own] = b.ctx->run(testing::as_channels_last(x), c10::nullopt);
        if (own) {
            expect_close(b.ctx->run(x, c10::nullopt), results[1], "NCHW input");
            expect_close(b.ctx->run(x[0], c10::nullopt), results[1][0], "unbatched input");
        }
    }
    expect_close(results[1], results[0], "Winograd vs direct");
    EXPECT_FALSE(results[1].equal(results[0])) << "the same bits: did the Winograd kernel run?";
}

// The timed choice (the default): whichever kernel it picks, later calls on the shape give the
// first call's bits; a recorded choice is taken as recorded.
TEST(Winograd, TimedAndRecordedChoices) {
    if (!avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 only";
    at::manual_seed(4);
    KernelChoice env(nullptr);
    const Case c = cases()[2];
    Built b = build(c, {{"relu"}});
    ASSERT_TRUE(b.ctx->has_winograd_kernel());
    const at::Tensor x = testing::as_channels_last(at::randn({c.n, c.in, c.h, c.w}));
    const at::Tensor first = b.ctx->run(x, c10::nullopt);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.ctx->run(x, c10::nullopt).equal(first));
    const at::Tensor want =
        at::relu(testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c)));
    expect_close(first, want, "timed");
    const auto chosen = b.ctx->choose_kernel(x.sizes().vec(), 2);
    EXPECT_GT(chosen.own_ms, 0);
    EXPECT_GT(chosen.onednn_ms, 0);
    at::Tensor runs[2];
    for (int own = 0; own < 2; ++own) {
        at::manual_seed(5);
        Built r = build(c, {{"relu"}});
        r.ctx->record_kernel(x.sizes().vec(), own == 1);
        runs[own] = r.ctx->run(x, c10::nullopt);
    }
    EXPECT_FALSE(runs[0].equal(runs[1])) << "the recorded choice was not taken";
    expect_close(runs[0], runs[1], "recorded direct vs recorded Winograd");
}

}  // namespace
}  // namespace ipex::ops
