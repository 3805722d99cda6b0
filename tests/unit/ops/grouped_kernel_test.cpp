// The own grouped convolution kernel (own_kernels.h, run_grouped) through ConvolutionContext,
// against an fp64 aten reference: 16, 32 and 48 outputs per group from 2 to 48 inputs, groups of
// 2, 4 and 8 outputs merged 16 outputs at a time, one group (dense, on CPUs without AVX-512),
// output widths around the 12-pixel block (tails, one pixel), strides, padding wider than the
// kernel, dilation, asymmetric and 1x1 / 5x5 / 7x7 kernels, images smaller than the kernel,
// batches, bias or none, every post-op it computes, fp32 and bf16; the convolutions it must leave
// to oneDNN; agreement with oneDNN and the timed choice.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <sstream>

#include "ops/conv_context.h"
#include "ops/own_kernels.h"
#include "unit/ops/ops_test_utils.h"

namespace ipex::ops {
namespace {

using testing::expect_within_rounding;
using testing::KernelChoice;
using testing::reference_post_ops;

struct GroupedCase {
    int64_t n, groups, in_per_group, out_per_group, h, w, kh, kw;
    std::vector<int64_t> stride, padding, dilation;
    bool bias;
};

ConvParams params_of(const GroupedCase &c) {
    return ConvParams{c.stride, c.padding, c.dilation, {0, 0}, c.groups, false};
}

std::string describe(const GroupedCase &c, const std::string &dtype, const PostOps &post) {
    std::ostringstream out;
    out << c.n << "x" << c.groups * c.in_per_group << "x" << c.h << "x" << c.w << " g" << c.groups << " ("
        << c.in_per_group << "->" << c.out_per_group << ") k" << c.kh << "x" << c.kw << " s" << c.stride[0] << ","
        << c.stride[1] << " p" << c.padding[0] << "," << c.padding[1] << " d" << c.dilation[0] << "," << c.dilation[1]
        << (c.bias ? " bias " : " ") << dtype << " +" << ops::describe(post);
    return out.str();
}

std::vector<GroupedCase> cases() {
    std::vector<GroupedCase> all;
    // Output widths 1, 5, 12 (one block), 13 and 28 (a tail block), with padding at both ends.
    for (int64_t w : {1, 9, 23, 25, 56}) {
        all.push_back({2, 4, 16, 16, 7, w, 3, 3, {2, 2}, {1, 1}, {1, 1}, true});   // RegNet's stride-2 layer
        all.push_back({1, 3, 16, 16, 5, w, 3, 3, {1, 1}, {1, 1}, {1, 1}, w % 2 == 0});
    }
    all.push_back({2, 2, 32, 32, 9, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, true});   // two output tiles
    all.push_back({1, 2, 16, 48, 8, 14, 3, 3, {2, 2}, {1, 1}, {1, 1}, true});   // more outputs than inputs
    all.push_back({1, 5, 2, 16, 6, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, true});    // one input pair
    all.push_back({2, 2, 48, 16, 6, 30, 3, 3, {1, 1}, {0, 0}, {1, 1}, false});  // no padding
    all.push_back({1, 3, 16, 16, 10, 27, 5, 5, {1, 1}, {2, 2}, {1, 1}, true});  // 5x5
    all.push_back({1, 2, 16, 16, 9, 19, 7, 7, {2, 2}, {3, 3}, {1, 1}, true});   // 7x7, stride 2
    all.push_back({1, 2, 16, 32, 8, 20, 3, 5, {1, 2}, {1, 2}, {1, 1}, true});   // asymmetric kernel and stride
    all.push_back({2, 3, 16, 16, 9, 26, 3, 3, {1, 1}, {2, 2}, {2, 2}, true});   // dilated
    all.push_back({1, 2, 16, 16, 12, 29, 3, 3, {2, 1}, {1, 3}, {3, 1}, true});  // mixed dilation and stride
    all.push_back({1, 4, 16, 16, 6, 15, 1, 1, {1, 1}, {0, 0}, {1, 1}, true});   // 1x1 kernel
    all.push_back({1, 2, 16, 16, 5, 11, 3, 3, {1, 1}, {4, 4}, {1, 1}, true});   // padding wider than the kernel
    all.push_back({2, 2, 16, 16, 2, 2, 3, 3, {3, 3}, {1, 1}, {1, 1}, true});    // image smaller than the kernel
    all.push_back({3, 9, 16, 16, 14, 14, 3, 3, {2, 2}, {1, 1}, {1, 1}, true});  // nine groups, a batch of 3
    // Groups of fewer than 16 outputs, merged 16 outputs at a time (zeros between the groups).
    all.push_back({2, 32, 4, 4, 9, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, true});    // ResNeXt's first stage
    all.push_back({1, 8, 8, 8, 11, 11, 3, 3, {2, 2}, {1, 1}, {1, 1}, false});   // 8 per group, stride 2
    all.push_back({1, 16, 2, 2, 7, 15, 3, 3, {1, 1}, {1, 1}, {1, 1}, true});    // 2 per group
    all.push_back({1, 8, 2, 4, 6, 10, 5, 5, {1, 1}, {2, 2}, {1, 1}, true});     // 2 inputs, 4 outputs per group
    all.push_back({1, 12, 6, 4, 8, 9, 3, 3, {1, 1}, {1, 1}, {2, 2}, true});     // 6 inputs, 4 outputs, dilated
    return all;
}

// One group (dense convolutions, which take the kernel only in fp32 without AVX-512).
std::vector<GroupedCase> dense_cases() {
    return {
        {2, 1, 128, 32, 9, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},  // DenseNet's 3x3
        {1, 1, 64, 64, 8, 23, 3, 3, {2, 2}, {1, 1}, {1, 1}, false},  // ResNet's stride-2 3x3
        {1, 1, 48, 16, 5, 7, 1, 1, {1, 1}, {0, 0}, {1, 1}, true},    // 1x1
        {2, 1, 32, 48, 6, 11, 3, 3, {1, 1}, {2, 2}, {2, 2}, true},   // three tiles, dilated
        {1, 1, 3, 16, 15, 17, 7, 7, {2, 2}, {3, 3}, {1, 1}, true},   // a stem's 7x7 of 3 channels, stride 2
    };
}

// Weights larger than any core's L2 over a few pixels: the AVX2 build walks them tile by tile
// (own_kernels::grouped_walks_tiles; 32 tiles or more, taken up to 16 threads).
std::vector<GroupedCase> tile_walk_cases() {
    return {
        {1, 1, 512, 512, 4, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},   // ResNet-50's last stage at batch 1
        {2, 1, 512, 512, 7, 7, 3, 3, {2, 2}, {1, 1}, {1, 1}, false},  // stride 2, two images, a tail block
        {1, 2, 256, 256, 5, 6, 3, 3, {1, 1}, {2, 2}, {2, 2}, true},   // two groups, dilated
        // A strided 1x1 reads a quarter of its input (800 KB; 200 KB read), ResNet-50's downsample.
        {1, 1, 1024, 2048, 14, 14, 1, 1, {2, 2}, {0, 0}, {1, 1}, true},
    };
}

own_kernels::Grouped geometry_of(const GroupedCase &c) {
    own_kernels::Grouped p;
    p.bf16 = false;
    p.groups = c.groups, p.in_per_group = c.in_per_group, p.out_per_group = c.out_per_group;
    p.n = c.n, p.ih = c.h, p.iw = c.w, p.kh = c.kh, p.kw = c.kw;
    p.oh = (c.h + 2 * c.padding[0] - c.dilation[0] * (c.kh - 1) - 1) / c.stride[0] + 1;
    p.ow = (c.w + 2 * c.padding[1] - c.dilation[1] * (c.kw - 1) - 1) / c.stride[1] + 1;
    return p;
}

// Whether this CPU gives one-group convolutions of this dtype the kernel.
bool dense_planned(const std::string &dtype) {
    return dtype == "fp32" && own_kernels::grouped_available(false) && !own_kernels::available(false);
}

struct Built {
    at::Tensor weight, bias;
    std::unique_ptr<ConvolutionContext> ctx;
};

Built build(const GroupedCase &c, const std::string &dtype, const PostOps &post, bool sum_in_place = false) {
    const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
    Built b;
    b.weight = (at::randn({c.groups * c.out_per_group, c.in_per_group, c.kh, c.kw}) * 0.2).to(type);
    if (c.bias) b.bias = at::randn({c.groups * c.out_per_group}).to(type);
    b.ctx = std::make_unique<ConvolutionContext>(b.weight, b.bias.defined() ? c10::optional<at::Tensor>(b.bias)
                                                                            : c10::nullopt,
                                                 params_of(c), dtype, post, sum_in_place, std::vector<int64_t>{});
    return b;
}

// Runs the case through the own kernel and checks it against fp64.
void check_case(const GroupedCase &c, const std::string &dtype, const PostOps &post) {
    const std::string what = describe(c, dtype, post);
    KernelChoice env("1");
    const Built b = build(c, dtype, post);
    ASSERT_TRUE(b.ctx->has_grouped_kernel()) << what;
    const at::ScalarType type = b.weight.scalar_type();
    const at::Tensor x = at::randn({c.n, c.groups * c.in_per_group, c.h, c.w}).to(type);
    const at::Tensor got = b.ctx->run(testing::as_channels_last(x), c10::nullopt);
    EXPECT_EQ(got.scalar_type(), type) << what;
    EXPECT_TRUE(testing::channels_last(got)) << what;
    const at::Tensor want =
        reference_post_ops(testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c)), post);
    expect_within_rounding(got, want, dtype, what);
}

class GroupedKernel : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        at::manual_seed(0);
        if (!own_kernels::grouped_available(GetParam() == "bf16"))
            GTEST_SKIP() << "this CPU lacks " << (GetParam() == "bf16" ? "AVX512-BF16" : "AVX2 + FMA");
    }
};

TEST_P(GroupedKernel, MatchesTheFp64ReferenceOverShapes) {
    for (const auto &c : cases()) check_case(c, GetParam(), {{"relu"}});
}

TEST_P(GroupedKernel, OneGroupWithoutAvx512) {
    if (!dense_planned(GetParam()))
        GTEST_SKIP() << "one-group convolutions take the kernel only in fp32 on CPUs without AVX-512";
    for (const auto &c : dense_cases()) check_case(c, GetParam(), {{"relu"}});
    check_case(dense_cases()[0], GetParam(), {{"clip", -0.5, 0.75}, {"silu"}});
}

// The tile walk against fp64, with ReLU in registers and other post-ops on the stored tile;
// the cases of cases() and dense_cases() all take the block walk.
TEST_P(GroupedKernel, TileWalkForLargeWeightsOverFewPixels) {
    if (GetParam() != "fp32" || own_kernels::available(false))
        GTEST_SKIP() << "the tile walk is the AVX2 build's (fp32 on CPUs without AVX-512)";
    if (at::get_num_threads() > 16) GTEST_SKIP() << "more threads than the cases have tiles for";
    for (const auto &c : cases()) EXPECT_FALSE(own_kernels::grouped_walks_tiles(geometry_of(c))) << describe(c, "", {});
    for (const auto &c : dense_cases()) EXPECT_FALSE(own_kernels::grouped_walks_tiles(geometry_of(c)));
    for (const auto &c : tile_walk_cases()) {
        EXPECT_TRUE(own_kernels::grouped_walks_tiles(geometry_of(c))) << describe(c, "fp32", {});
        check_case(c, "fp32", {{"relu"}});
    }
    // Post-ops that keep the sums' scale (expect_within_rounding's bound follows the output's scale, and a
    // clip would hide sums of 4608 products about 20 times larger).
    check_case(tile_walk_cases()[2], "fp32", {{"leaky_relu", 0.1}, {"hardswish"}});
    check_case(tile_walk_cases()[1], "fp32", {});
}

// A residual sum first in the post-ops (ResNet basic blocks: conv + identity, then ReLU) runs in
// the AVX2 build: dense, grouped and tile-walk cases, scaled sums, in place into the summand
// and into a copy; a sum after an activation, and AVX-512 CPUs, leave the convolution to oneDNN.
TEST_P(GroupedKernel, ResidualSumInTheAvx2Build) {
    const std::string dtype = GetParam();
    if (dtype != "fp32" || own_kernels::available(false)) {
        const Built b = build(dense_cases()[0], dtype, {{"sum", 1.0}, {"relu"}});
        EXPECT_FALSE(b.ctx->has_grouped_kernel()) << "only the AVX2 build takes a sum";
        GTEST_SKIP() << "the residual sum is the AVX2 build's (fp32 on CPUs without AVX-512)";
    }
    const std::vector<std::pair<GroupedCase, PostOps>> runs{
        {dense_cases()[0], {{"sum", 1.0}, {"relu"}}},
        {dense_cases()[1], {{"sum", 0.5}}},
        {cases()[0], {{"sum", 1.0}, {"clip", -0.5, 0.75}, {"silu"}}},
        {cases()[15], {{"sum", 2.0}, {"relu"}}},           // groups of 4 outputs merged
        {tile_walk_cases()[0], {{"sum", 1.0}, {"relu"}}},  // the tile walk
    };
    for (const auto &[c, post] : runs) {
        const std::string what = describe(c, dtype, post);
        KernelChoice env("1");
        const Built b = build(c, dtype, post, /*sum_in_place=*/true);
        ASSERT_TRUE(b.ctx->has_grouped_kernel()) << what;
        const at::Tensor x = at::randn({c.n, c.groups * c.in_per_group, c.h, c.w});
        const at::Tensor conv = testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c));
        testing::expect_sum_into_copy_and_in_place(
            *b.ctx, x, conv, post, what,
            [&](const at::Tensor &got, const at::Tensor &want, const std::string &about) {
                expect_within_rounding(got, want, dtype, about);
            });
    }
    EXPECT_FALSE(build(dense_cases()[0], dtype, {{"relu"}, {"sum", 1.0}}).ctx->has_grouped_kernel());
}

// Sigmoid and SiLU over their whole range, NaN included: zero weights, so each output is its
// channel's bias (-200 .. 100, 0, NaN), against fp64.
TEST_P(GroupedKernel, SigmoidAndSiluOverTheirRange) {
    const std::string dtype = GetParam();
    if (dtype != "fp32") GTEST_SKIP() << "the bias values are fp32's";
    const std::vector<float> values{-200.f, -104.f, -88.5f, -87.f, -60.f, -17.f, -3.f, -0.5f,
                                    0.f,    1e-3f,  0.7f,   4.f,   20.f,  88.5f, 100.f, NAN};
    const GroupedCase c{1, 2, 16, 16, 3, 5, 1, 1, {1, 1}, {0, 0}, {1, 1}, true};
    for (const std::string act : {"sigmoid", "silu"}) {
        KernelChoice env("1");
        const at::Tensor weight = at::zeros({32, 16, 1, 1});
        const at::Tensor bias = at::cat({at::tensor(values), at::tensor(values).flip(0)});
        ConvolutionContext ctx(weight, bias, params_of(c), dtype, {{act}}, false, {});
        ASSERT_TRUE(ctx.has_grouped_kernel());
        const at::Tensor got = ctx.run(testing::as_channels_last(at::randn({1, 32, 3, 5})), c10::nullopt);
        const at::Tensor b = bias.to(at::kDouble).view({1, 32, 1, 1}).expand({1, 32, 3, 5});
        const at::Tensor want = act == "sigmoid" ? at::sigmoid(b) : b * at::sigmoid(b);
        const at::Tensor g = got.to(at::kDouble);
        EXPECT_TRUE(g.isnan().equal(want.isnan())) << act << ": NaN where the bias is NaN, only there";
        const at::Tensor finite = want.isnan().logical_not();
        const at::Tensor error = (g - want).abs().masked_select(finite);
        const at::Tensor bound = (want.abs() * 1e-6 + 1e-30).masked_select(finite);
        EXPECT_TRUE((error <= bound).all().item<bool>()) << act << ": max error " << error.max().item<double>();
    }
}

TEST_P(GroupedKernel, EveryPostOpAndNone) {
    const GroupedCase c = cases()[0];
    const std::vector<PostOps> chains = {{},
                                         {{"leaky_relu", 0.1}},
                                         {{"clip", -0.5, 0.75}},
                                         {{"silu"}},
                                         {{"sigmoid"}},
                                         {{"hardswish"}},
                                         {{"relu"}, {"clip", 0.0, 6.0}, {"silu"}}};
    for (const auto &post : chains) check_case(c, GetParam(), post);
}

// An input the own kernel has to convert first (NCHW, another dtype), and an unbatched one.
TEST_P(GroupedKernel, OtherInputLayoutsAndUnbatched) {
    KernelChoice env("1");
    const GroupedCase c = cases()[0];
    const Built b = build(c, GetParam(), {});
    const at::Tensor x = at::randn({1, 64, c.h, c.w});
    const at::Tensor want = testing::reference_conv(x.to(b.weight.scalar_type()).to(at::kDouble), b.weight, b.bias,
                                                    params_of(c));
    expect_within_rounding(b.ctx->run(x, c10::nullopt), want, GetParam(), "NCHW fp32 input");
    expect_within_rounding(b.ctx->run(x.squeeze(0), c10::nullopt), want.squeeze(0), GetParam(), "unbatched");
}

// The kernel and oneDNN give the same convolution within the dtype's bound of each other.
TEST_P(GroupedKernel, AgreesWithOneDnn) {
    const GroupedCase c{2, 9, 16, 16, 28, 28, 3, 3, {2, 2}, {1, 1}, {1, 1}, true};
    const at::ScalarType type = GetParam() == "bf16" ? at::kBFloat16 : at::kFloat;
    const at::Tensor x = testing::as_channels_last(at::randn({c.n, 144, c.h, c.w}).to(type));
    at::Tensor results[2];
    for (int own = 0; own < 2; ++own) {
        KernelChoice env(own ? "1" : "0");
        at::manual_seed(3);
        const Built b = build(c, GetParam(), {{"relu"}});
        ASSERT_EQ(b.ctx->has_grouped_kernel(), own == 1);
        results[own] = b.ctx->run(x, c10::nullopt);
    }
    expect_within_rounding(results[1], results[0].to(at::kDouble), GetParam(), "own vs oneDNN", 2);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GroupedKernel, ::testing::Values("fp32", "bf16"));

// Whether a convolution of this weight shape, groups, dtype and post-ops plans the grouped kernel.
bool has(std::vector<int64_t> w, int64_t groups, const std::string &dtype, PostOps post = {}) {
    std::vector<int64_t> ones(w.size() - 2, 1), zeros(w.size() - 2, 0);
    return ConvolutionContext(at::randn(w), c10::nullopt, ConvParams{ones, ones, ones, zeros, groups, false}, dtype,
                              std::move(post), false, {})
        .has_grouped_kernel();
}

// fp32 takes the kernel wherever AVX2 + FMA is (the AVX2 build without AVX-512), bf16 only with
// AVX512-BF16.
TEST(GroupedKernelScope, Fp32WithAvx2Bf16WithAvx512Bf16) {
    if (!own_kernels::grouped_available(false)) GTEST_SKIP() << "this CPU lacks AVX2 + FMA";
    KernelChoice env("1");
    EXPECT_TRUE(has({64, 16, 3, 3}, 4, "fp32"));
    EXPECT_TRUE(has({64, 16, 3, 3}, 4, "fp32", {{"silu"}}));
    EXPECT_TRUE(has({32, 4, 3, 3}, 4, "fp32"));   // 8 outputs per group, two taken as one
    EXPECT_TRUE(has({128, 4, 3, 3}, 32, "fp32"));  // 4 outputs per group (ResNeXt's first stage)
    EXPECT_FALSE(has({24, 4, 3, 3}, 3, "fp32"));   // 8 outputs per group, an odd number of groups
    EXPECT_FALSE(has({36, 4, 3, 3}, 6, "fp32"));   // 6 outputs per group: not a divisor of 16
    EXPECT_FALSE(has({16, 1, 3, 3}, 16, "fp32"));  // depthwise
    // One group, 3x3 and 1x1, only without AVX-512 (where the 1x1 is the pointwise kernel's).
    EXPECT_EQ(has({64, 3, 3, 3}, 1, "fp32"), dense_planned("fp32"));
    EXPECT_EQ(has({32, 64, 1, 1}, 1, "fp32"), dense_planned("fp32"));
    EXPECT_FALSE(has({40, 16, 3, 3}, 1, "fp32"));  // one group of 40 outputs: not a multiple of 16
    {
        KernelChoice timed("auto");
        EXPECT_EQ(has({64, 3, 3, 3}, 1, "fp32"), dense_planned("fp32"));
    }
    if (own_kernels::available(true)) EXPECT_TRUE(has({64, 16, 3, 3}, 4, "bf16"));  // else no bf16 convolution at all
}

TEST(GroupedKernelScope, OtherConvolutionsStayOnOneDnn) {
    if (!own_kernels::available(true)) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    KernelChoice env("1");
    EXPECT_TRUE(has({64, 16, 3, 3}, 4, "bf16"));
    {
        // A trailing SiLU runs inside the grouped kernel, not split after oneDNN's convolution.
        const ConvolutionContext silu(at::randn({64, 16, 3, 3}), c10::nullopt,
                                      ConvParams{{1, 1}, {1, 1}, {1, 1}, {0, 0}, 4, false}, "bf16", {{"silu"}}, false,
                                      {});
        EXPECT_TRUE(silu.has_grouped_kernel());
        EXPECT_FALSE(silu.has_split_activation());
    }
    EXPECT_TRUE(has({64, 3, 3, 3}, 4, "fp32"));        // an odd input count in fp32
    EXPECT_FALSE(has({64, 3, 3, 3}, 4, "bf16"));       // but not in bf16 (pairs)
    EXPECT_TRUE(has({32, 4, 3, 3}, 4, "bf16"));        // 8 outputs per group, two taken as one
    EXPECT_FALSE(has({24, 4, 3, 3}, 3, "bf16"));       // but not three groups of them
    EXPECT_FALSE(has({64, 64, 3, 3}, 1, "bf16"));      // one group
    EXPECT_FALSE(has({64, 64, 3, 3}, 1, "fp32"));      // in fp32 too, on this CPU with AVX-512
    EXPECT_FALSE(has({16, 1, 3, 3}, 16, "bf16"));      // depthwise: its own kernel
    EXPECT_FALSE(has({64, 16, 9, 6}, 4, "bf16"));      // more than 49 taps
    EXPECT_FALSE(has({64, 16, 3}, 4, "bf16"));         // 1-D
    EXPECT_FALSE(has({64, 16, 3, 3}, 4, "bf32"));      // bf16 math with an fp32 output
    EXPECT_FALSE(has({64, 16, 3, 3}, 4, "bf16", {{"sum", 1.0}}));      // a residual sum
    EXPECT_FALSE(has({64, 16, 3, 3}, 4, "bf16", {{"gelu_erf"}}));      // a post-op the kernel lacks
    EXPECT_FALSE(ConvolutionContext(at::randn({64, 16, 3, 3}), c10::nullopt,
                                    ConvParams{{1, 1}, {1, 1}, {1, 1}, {0, 0}, 4, true}, "bf16", {}, false, {})
                     .has_grouped_kernel());  // transposed
    KernelChoice off("0");
    EXPECT_FALSE(has({64, 16, 3, 3}, 4, "bf16"));
}

// The timed choice (the default): whichever path it picks, the result is the convolution, and
// later calls on the shape give the first call's bits.
TEST(GroupedKernelScope, TimedChoiceIsKeptPerShape) {
    if (!own_kernels::available(true)) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(4);
    KernelChoice env(nullptr);
    const GroupedCase c = cases()[0];
    const Built b = build(c, "bf16", {{"relu"}});
    ASSERT_TRUE(b.ctx->has_grouped_kernel());
    const at::Tensor x = testing::as_channels_last(at::randn({c.n, 64, c.h, c.w}).to(at::kBFloat16));
    const at::Tensor first = b.ctx->run(x, c10::nullopt);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.ctx->run(x, c10::nullopt).equal(first));
    const at::Tensor want = at::relu(testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c)));
    expect_within_rounding(first, want, "bf16", "timed");
}

// The kernel's own copy of the weight is made on its first run: a convolution whose shapes all
// run oneDNN's way holds only oneDNN's.
TEST(GroupedKernelScope, WeightIsPackedOnlyWhenTheKernelRuns) {
    if (!own_kernels::available(true)) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(5);
    KernelChoice env(nullptr);
    const GroupedCase c = cases()[2];  // 7x9: no tap reads padding only (no trimmed context)
    const Built b = build(c, "bf16", {{"relu"}});
    ASSERT_TRUE(b.ctx->has_grouped_kernel());
    EXPECT_EQ(b.ctx->grouped_weight_bytes(), 0u);
    const std::vector<int64_t> onednn_shape{c.n, c.groups * c.in_per_group, c.h, c.w};
    ASSERT_EQ(b.ctx->trimmed_for(onednn_shape), nullptr);
    const std::vector<int64_t> own_shape{c.n + 1, c.groups * c.in_per_group, c.h, c.w};
    b.ctx->record_kernel(onednn_shape, false);
    b.ctx->record_kernel(own_shape, true);
    const at::Tensor want = b.ctx->run(testing::as_channels_last(at::randn(onednn_shape).to(at::kBFloat16)),
                                       c10::nullopt);
    EXPECT_EQ(b.ctx->grouped_weight_bytes(), 0u) << "packed for a shape that runs oneDNN's way";
    const at::Tensor x = testing::as_channels_last(at::randn(own_shape).to(at::kBFloat16));
    const at::Tensor got = b.ctx->run(x, c10::nullopt);
    EXPECT_EQ(b.ctx->grouped_weight_bytes(), static_cast<size_t>(b.weight.numel()) * 2);
    const at::Tensor ref = at::relu(testing::reference_conv(x.to(at::kDouble), b.weight, b.bias, params_of(c)));
    expect_within_rounding(got, ref, "bf16", "recorded own");
}

}  // namespace
}  // namespace ipex::ops
