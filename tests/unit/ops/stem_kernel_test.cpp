// The own bf16 stem kernel (own_stem.h) through ConvolutionContext, against an fp64 aten
// reference: 1-4 input channels, output channels across the 16-channel blocks and 64-channel
// tiles (tails of 1-15, several tiles), widths around the 16-pixel conversion steps, 2x2 to
// 7x7 kernels, 4x4 stride 4, asymmetric kernels and strides, padding wider than the kernel,
// images smaller than the kernel, every post-op it computes; from fp32 planes and from
// channels-last bf16 (the same values both ways), written into a part of a batch's output,
// unbatched; non-finite inputs reaching only the outputs whose windows hold them; the
// convolutions it leaves to others; the choice timed from planes and recorded.
#include <gtest/gtest.h>

#include <sstream>

#include "ops/conv_context.h"
#include "ops/own_kernels.h"
#include "ops/own_stem.h"
#include "unit/ops/ops_test_utils.h"

namespace ipex::ops {
namespace {

using testing::expect_within_rounding;
using testing::KernelChoice;
using testing::reference_post_ops;

struct StemCase {
    int64_t n, c, out, h, w, kh, kw;
    std::vector<int64_t> stride, padding;
    bool bias;
};

ConvParams params_of(const StemCase &c) { return ConvParams{c.stride, c.padding, {1, 1}, {0, 0}, 1, false}; }

std::string describe(const StemCase &c, const PostOps &post) {
    std::ostringstream out;
    out << c.n << "x" << c.c << "x" << c.h << "x" << c.w << " -> " << c.out << " k" << c.kh << "x" << c.kw << " s"
        << c.stride[0] << "," << c.stride[1] << " p" << c.padding[0] << "," << c.padding[1] << (c.bias ? " bias " : " ")
        << ops::describe(post);
    return out.str();
}

std::vector<StemCase> cases() {
    return {
        {2, 3, 16, 17, 33, 3, 3, {2, 2}, {1, 1}, true},     // MobileNetV3's stem; widths past 16 and 32
        {1, 3, 64, 15, 15, 3, 3, {2, 2}, {0, 0}, true},     // SqueezeNet's: one whole tile, no padding
        {2, 3, 24, 9, 16, 3, 3, {2, 2}, {1, 1}, false},     // ShuffleNet's: a block's tail of 8
        {1, 3, 64, 23, 21, 7, 7, {2, 2}, {3, 3}, true},     // ResNet's 7x7
        {2, 3, 96, 16, 20, 4, 4, {4, 4}, {0, 0}, true},     // ConvNeXt's patches: a tile and a half
        {1, 1, 33, 12, 5, 3, 3, {1, 1}, {1, 1}, true},      // one channel, a tail of one
        {3, 2, 70, 10, 31, 5, 5, {1, 1}, {2, 2}, true},     // two channels, 5x5, a second tile of 6
        {1, 4, 130, 8, 9, 2, 2, {1, 1}, {0, 0}, false},     // four channels, three tiles
        {1, 3, 8, 11, 17, 3, 5, {2, 1}, {1, 2}, true},      // asymmetric kernel and stride
        {1, 3, 16, 6, 7, 3, 3, {1, 1}, {4, 4}, true},       // padding wider than the kernel
        {2, 3, 16, 2, 3, 5, 5, {2, 2}, {2, 2}, true},       // image smaller than the kernel
        {1, 3, 1, 1, 1, 3, 3, {1, 1}, {1, 1}, true},        // one pixel, one output channel
        {1, 3, 32, 5, 64, 1, 3, {1, 3}, {0, 1}, true},      // one kernel row, stride 3 across
    };
}

struct Built {
    at::Tensor weight, bias;
    std::unique_ptr<ConvolutionContext> ctx;
};

Built build(const StemCase &c, const PostOps &post, const std::string &dtype = "bf16") {
    Built b;
    b.weight = (at::randn({c.out, c.c, c.kh, c.kw}) * 0.3).to(at::kBFloat16);
    if (c.bias) b.bias = at::randn({c.out}).to(at::kBFloat16);
    b.ctx = std::make_unique<ConvolutionContext>(b.weight, b.bias.defined() ? c10::optional<at::Tensor>(b.bias)
                                                                            : c10::nullopt,
                                                 params_of(c), dtype, post, false, std::vector<int64_t>{});
    return b;
}

// The fp64 reference of a bf16 convolution of x (its bf16 values, as the kernel reads them).
at::Tensor reference(const StemCase &c, const Built &b, const at::Tensor &x, const PostOps &post) {
    return reference_post_ops(testing::reference_conv(x.to(at::kBFloat16).to(at::kDouble), b.weight, b.bias,
                                                      params_of(c)),
                              post);
}

// A kernel row's pairs read in place and the pairs the odd rows' tails make.
TEST(StemPlan, PairsOfKernelRowsAndTheirTails) {
    const auto plan = [](int64_t c, int64_t kh, int64_t kw) {
        return own_stem::make_plan(at::randn({8, c, kh, kw}), at::Tensor(), {1, 1}, {0, 0}, own_kernels::Problem{});
    };
    struct Want {
        int64_t c, kh, kw, row_pairs, tail_groups;
    };
    for (const Want &w : {Want{3, 3, 3, 4, 2}, Want{3, 7, 7, 10, 4}, Want{3, 4, 4, 6, 0}, Want{1, 3, 3, 1, 2},
                          Want{2, 5, 5, 5, 0}, Want{3, 1, 3, 4, 1}, Want{4, 2, 2, 4, 0}, Want{1, 2, 1, 0, 1}}) {
        const own_stem::Plan p = plan(w.c, w.kh, w.kw);
        EXPECT_EQ(p.row_pairs(), w.row_pairs) << w.c << " " << w.kh << "x" << w.kw;
        EXPECT_EQ(p.tail_groups(), w.tail_groups) << w.c << " " << w.kh << "x" << w.kw;
        EXPECT_EQ(p.pairs(), w.kh * w.row_pairs + w.tail_groups);
        EXPECT_EQ(p.packed.numel(), p.pairs() * 4 * 32);  // one tile of 8 channels
    }
}

class StemKernel : public ::testing::Test {
protected:
    void SetUp() override {
        at::manual_seed(0);
        if (!own_stem::available()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
    }
};

TEST_F(StemKernel, MatchesTheFp64ReferenceFromPlanesAndChannelsLast) {
    KernelChoice env("1");
    const std::vector<PostOps> posts = {{{"relu"}}, {}, {{"hardswish"}}, {{"silu"}},
                                        {{"clip", -0.5, 0.75}, {"sigmoid"}}, {{"leaky_relu", 0.1}}};
    for (const auto &c : cases())
        for (size_t k = 0; k < posts.size(); ++k) {
            if (k > 1 && c.c != 3) continue;  // every post-op on the 3-channel shapes
            const PostOps &post = posts[k];
            const std::string what = describe(c, post);
            const Built b = build(c, post);
            ASSERT_TRUE(b.ctx->has_stem_kernel()) << what;
            const at::Tensor x = at::randn({c.n, c.c, c.h, c.w});
            const at::Tensor planes = b.ctx->run(x, c10::nullopt);
            EXPECT_EQ(planes.scalar_type(), at::kBFloat16) << what;
            EXPECT_TRUE(testing::channels_last(planes)) << what;
            expect_within_rounding(planes, reference(c, b, x, post), "bf16", what);
            // The same bf16 values channels-last: the same sums in the same order.
            const at::Tensor last = b.ctx->run(testing::as_channels_last(x.to(at::kBFloat16)), c10::nullopt);
            EXPECT_TRUE(last.equal(planes)) << what;
        }
}

// How ipex::convolution_max_pool and the chain op run a stem: parts of the batch's fp32 planes
// written into their slices of the batch's output.
TEST_F(StemKernel, WritesPartsOfABatchAndUnbatchedInputs) {
    KernelChoice env("1");
    const StemCase c{5, 3, 24, 13, 18, 3, 3, {2, 2}, {1, 1}, true};
    const Built b = build(c, {{"relu"}});
    const at::Tensor x = at::randn({c.n, c.c, c.h, c.w});
    const at::Tensor whole = b.ctx->run(x, c10::nullopt);
    const at::Tensor out = testing::as_channels_last(at::zeros(whole.sizes(), at::kBFloat16));
    b.ctx->run_into(x.narrow(0, 0, 2), out.narrow(0, 0, 2));
    b.ctx->run_into(x.narrow(0, 2, 3), out.narrow(0, 2, 3));
    EXPECT_TRUE(out.equal(whole));
    const at::Tensor one = b.ctx->run(x[3], c10::nullopt);
    ASSERT_EQ(one.dim(), 3);
    EXPECT_TRUE(one.equal(whole[3]));
}

// A non-finite input value reaches exactly the outputs whose windows hold it: no product
// meets a value that is not a tap (the zero channel and the padding are the ring's own zeros).
TEST_F(StemKernel, NonFiniteInputsStayInTheirWindows) {
    KernelChoice env("1");
    for (const auto &c : {StemCase{1, 3, 16, 9, 11, 3, 3, {2, 2}, {1, 1}, true},
                          StemCase{1, 1, 16, 8, 8, 3, 3, {1, 1}, {1, 1}, false},
                          StemCase{1, 2, 16, 7, 12, 7, 7, {2, 2}, {3, 3}, true}}) {
        const Built b = build(c, {});
        at::Tensor x = at::randn({c.n, c.c, c.h, c.w});
        x[0][c.c - 1][c.h / 2][c.w / 2] = std::numeric_limits<float>::infinity();
        x[0][0][1][c.w - 1] = std::numeric_limits<float>::quiet_NaN();
        const at::Tensor got = b.ctx->run(x, c10::nullopt).to(at::kDouble);
        const at::Tensor want = reference(c, b, x, {});
        const std::string what = describe(c, {});
        EXPECT_TRUE(got.isnan().equal(want.isnan())) << what;
        EXPECT_TRUE(got.isinf().equal(want.isinf())) << what;
        const at::Tensor finite = want.isfinite();
        EXPECT_GT(finite.sum().item<int64_t>(), 0) << what;
        EXPECT_TRUE(at::allclose(got.masked_select(finite), want.masked_select(finite), 1.0 / 128, 1e-2)) << what;
    }
}

TEST_F(StemKernel, LeavesOtherConvolutionsToOthers) {
    KernelChoice env("1");
    const auto planned = [](int64_t c, int64_t groups, int64_t kh, std::vector<int64_t> dilation,
                            const std::string &dtype, const PostOps &post, bool transposed = false) {
        const at::Tensor w = transposed ? at::randn({c, 8 / groups, kh, kh}) : at::randn({8, c / groups, kh, kh});
        ConvolutionContext ctx(w.to(dtype == "bf16" ? at::kBFloat16 : at::kFloat), c10::nullopt,
                               ConvParams{{1, 1}, {1, 1}, dilation, {0, 0}, groups, transposed}, dtype, post, false,
                               {});
        return ctx.has_stem_kernel();
    };
    EXPECT_TRUE(planned(3, 1, 3, {1, 1}, "bf16", {{"relu"}}));
    EXPECT_TRUE(planned(4, 1, 2, {1, 1}, "bf16", {}));
    EXPECT_FALSE(planned(5, 1, 3, {1, 1}, "bf16", {}));              // more channels than a ring pixel
    EXPECT_FALSE(planned(3, 1, 3, {1, 1}, "fp32", {}));              // bf16 only
    EXPECT_FALSE(planned(4, 2, 3, {1, 1}, "bf16", {}));              // groups
    EXPECT_FALSE(planned(3, 1, 3, {2, 2}, "bf16", {}));              // dilation
    EXPECT_FALSE(planned(3, 1, 1, {1, 1}, "bf16", {}));              // 1x1: the pointwise kernel's
    EXPECT_FALSE(planned(3, 1, 3, {1, 1}, "bf16", {{"sum", 1.0}}));  // a residual sum
    EXPECT_FALSE(planned(3, 1, 3, {1, 1}, "bf16", {{"gelu_erf"}}));  // a post-op it does not compute
    EXPECT_FALSE(planned(3, 1, 3, {1, 1}, "bf16", {}, true));        // transposed
    EXPECT_FALSE(own_stem::fits(3, 17, 3, 1, {1, 1}));
    EXPECT_TRUE(own_stem::fits(3, 16, 16, 1, {1, 1}));
}

// The choice is timed from fp32 planes (each call after a CacheEvictor's) and recorded; both
// kernels give the reference's values and the recorded one runs.
TEST_F(StemKernel, ChoiceTimedFromPlanesAndRecorded) {
    const StemCase c{2, 3, 32, 20, 24, 3, 3, {2, 2}, {1, 1}, true};
    const Built b = build(c, {{"hardswish"}});
    ASSERT_TRUE(b.ctx->has_kernel_choice());
    const auto chosen = b.ctx->choose_kernel({c.n, c.c, c.h, c.w}, 2);
    EXPECT_GT(chosen.own_ms, 0.0);
    EXPECT_GT(chosen.onednn_ms, 0.0);
    ASSERT_EQ(b.ctx->recorded_kernels().size(), 1u);
    EXPECT_EQ(b.ctx->recorded_kernels()[0].second, chosen.own);
    const at::Tensor x = at::randn({c.n, c.c, c.h, c.w});
    const at::Tensor want = reference(c, b, x, {{"hardswish"}});
    expect_within_rounding(b.ctx->run(x, c10::nullopt), want, "bf16", "recorded");
    for (const char *kernels : {"0", "1"}) {
        KernelChoice env(kernels);
        const Built forced = {b.weight, b.bias,
                              std::make_unique<ConvolutionContext>(b.weight, b.bias, params_of(c), "bf16",
                                                                   PostOps{{"hardswish"}}, false,
                                                                   std::vector<int64_t>{})};
        EXPECT_EQ(forced.ctx->has_stem_kernel(), std::string(kernels) == "1");
        expect_within_rounding(forced.ctx->run(x, c10::nullopt), want, "bf16",
                               std::string("IPEX_CONV_KERNELS=") + kernels);
    }
}

}  // namespace
}  // namespace ipex::ops
