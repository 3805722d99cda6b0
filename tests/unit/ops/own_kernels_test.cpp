// The own depthwise convolution kernel (own_kernels.h) through ConvolutionContext, against
// an fp64 aten reference: odd channel counts (vector tails of both builds), odd sizes,
// strides, padding, dilation, asymmetric kernels, every post-op it computes and chains of them,
// fp32 and bf16, large inputs through sigmoid; the convolutions it must leave to oneDNN; the timed choice.
// Then a convolution's trailing sigmoid / SiLU run by the same kernel after oneDNN's
// convolution (the split): which post-ops split, results, the choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "ops/conv_context.h"
#include "ops/own_kernels.h"
#include "unit/ops/ops_test_utils.h"

namespace ipex::ops {
namespace {

using testing::KernelChoice;
using testing::reference_post_ops;

struct DwCase {
    int64_t n, c, h, w, kh, kw;
    ConvParams params;
    bool bias;
};

ConvParams params(std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                  int64_t groups) {
    return ConvParams{std::move(stride), std::move(padding), std::move(dilation), {0, 0}, groups, false};
}

std::vector<DwCase> cases() {
    std::vector<DwCase> all;
    // Channels: one vector, a tail, two vectors and a tail, four and more with tails; past 64,
    // the rest after the 64-channel passes in a pass of 4 (100), 2 (88) or 1 (144) vectors.
    for (int64_t c : {2, 16, 17, 40, 64, 88, 100, 144}) {
        all.push_back({2, c, 13, 11, 3, 3, params({1, 1}, {1, 1}, {1, 1}, c), true});
        all.push_back({1, c, 12, 19, 3, 3, params({2, 2}, {1, 1}, {1, 1}, c), c % 2 == 0});
        all.push_back({2, c, 9, 23, 5, 5, params({1, 1}, {2, 2}, {1, 1}, c), true});
        all.push_back({1, c, 15, 17, 5, 5, params({2, 2}, {2, 2}, {1, 1}, c), true});
    }
    // The AVX2 build's passes of 16 channels with a rest of 9-15 (two vectors, the last masked),
    // its 7-wide interior (stride 1) and rows of every block width (6, 4, 2, 1 after the edges).
    all.push_back({2, 58, 10, 29, 3, 3, params({1, 1}, {1, 1}, {1, 1}, 58), true});
    all.push_back({1, 58, 9, 21, 3, 3, params({2, 2}, {1, 1}, {1, 1}, 58), true});
    all.push_back({1, 30, 11, 26, 7, 7, params({1, 1}, {3, 3}, {1, 1}, 30), true});
    all.push_back({2, 26, 9, 18, 5, 5, params({2, 2}, {2, 2}, {1, 1}, 26), false});
    all.push_back({1, 24, 9, 10, 3, 5, params({1, 2}, {1, 0}, {1, 1}, 24), true});      // asymmetric
    all.push_back({2, 33, 11, 14, 3, 3, params({1, 1}, {2, 2}, {2, 2}, 33), true});     // dilated
    all.push_back({1, 20, 10, 31, 7, 7, params({3, 3}, {3, 3}, {1, 1}, 20), false});    // stride 3, 7x7
    all.push_back({2, 48, 7, 7, 3, 3, params({1, 1}, {0, 0}, {1, 1}, 48), true});       // no padding
    all.push_back({1, 32, 1, 1, 3, 3, params({1, 1}, {1, 1}, {1, 1}, 32), true});       // 1x1 image
    all.push_back({1, 18, 4, 40, 1, 1, params({1, 1}, {0, 0}, {1, 1}, 18), true});      // 1x1 kernel
    all.push_back({1, 64, 6, 8, 3, 3, params({1, 1}, {4, 4}, {1, 1}, 64), true});       // padding > kernel
    all.push_back({3, 80, 14, 14, 5, 5, params({1, 1}, {2, 2}, {3, 1}, 80), true});     // mixed dilation
    return all;
}

std::string describe(const DwCase &c) {
    std::ostringstream out;
    out << c.n << "x" << c.c << "x" << c.h << "x" << c.w << " k" << c.kh << "x" << c.kw << " s" << c.params.stride[0]
        << "," << c.params.stride[1] << " p" << c.params.padding[0] << "," << c.params.padding[1] << " d"
        << c.params.dilation[0] << "," << c.params.dilation[1] << (c.bias ? " bias" : "");
    return out.str();
}

// |got - want| <= rel * |want| + abs_of_max * max |want| for every element.
void expect_elementwise(const at::Tensor &got, const at::Tensor &want, double rel, double abs_of_max,
                        const std::string &what) {
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
    const double scale = std::max(w.abs().max().item<double>(), 1e-12);
    const at::Tensor excess = (g - w).abs() - (w.abs() * rel + abs_of_max * scale);
    EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": max error " << (g - w).abs().max().item<double>()
                                                << " at scale " << scale;
    EXPECT_FALSE(g.isnan().any().item<bool>()) << what;
}

// The bound of one dtype: bf16 output rounding (2^-9 relative) with room for the fp32 sums;
// fp32 sums of at most 49 products.
void expect_dtype_close(const at::Tensor &got, const at::Tensor &want, const std::string &dtype,
                        const std::string &what) {
    if (dtype == "bf16")
        expect_elementwise(got, want, 1.0 / 256, 1e-5, what);
    else
        expect_elementwise(got, want, 1e-5, 2e-6, what);
}

// Runs the case on a context built with `choice` and checks it against fp64.
void check_case(const DwCase &c, const std::string &dtype, const PostOps &post, const char *choice,
                bool expect_kernel, double input_scale = 1.0) {
    const bool bf16 = dtype == "bf16";
    const at::ScalarType type = bf16 ? at::kBFloat16 : at::kFloat;
    const at::Tensor w = (at::randn({c.c, 1, c.kh, c.kw}) * 0.3).to(type);
    const at::Tensor b = c.bias ? at::randn({c.c}).to(type) : at::Tensor();
    const at::Tensor x = (at::randn({c.n, c.c, c.h, c.w}) * input_scale).to(type);
    KernelChoice env(choice);
    ConvolutionContext ctx(w, b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt, c.params, dtype, post,
                           false, {});
    const std::string what = describe(c) + " " + dtype + " +" + ops::describe(post);
    ASSERT_EQ(ctx.has_depthwise_kernel(), expect_kernel) << what;
    const at::Tensor got = ctx.run(testing::as_channels_last(x), c10::nullopt);
    EXPECT_EQ(got.scalar_type(), type) << what;
    EXPECT_TRUE(testing::channels_last(got)) << what;
    const at::Tensor want = reference_post_ops(testing::reference_conv(x.to(at::kDouble), w, b, c.params), post);
    expect_dtype_close(got, want, dtype, what);
}

bool kernel_runs(const std::string &dtype) { return own_kernels::depthwise_available(dtype == "bf16"); }

class DepthwiseKernel : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        at::manual_seed(0);
        if (!kernel_runs(GetParam())) GTEST_SKIP() << "this CPU lacks AVX-512" << (GetParam() == "bf16" ? "-BF16" : "");
    }
};

TEST_P(DepthwiseKernel, MatchesTheFp64ReferenceOverShapes) {
    for (const auto &c : cases()) check_case(c, GetParam(), {}, "1", true);
}

TEST_P(DepthwiseKernel, EveryPostOpAndChains) {
    const std::vector<PostOps> posts = {
        {{"relu"}},
        {{"leaky_relu", 0.1}},
        {{"clip", 0.0, 6.0}},
        {{"silu"}},
        {{"sigmoid"}},
        {{"hardswish"}},
        {{"silu"}, {"clip", -0.5, 0.5}},
        {{"clip", -1.0, 1.0}, {"sigmoid"}, {"leaky_relu", 0.5}, {"relu"}},
    };
    const std::vector<DwCase> some = {cases()[5], cases()[14], cases()[22], cases().back()};
    for (const auto &post : posts)
        for (const auto &c : some) check_case(c, GetParam(), post, "1", true);
}

// Sums of magnitude 100 and more: sigmoid saturates to 0 and 1 without a NaN or infinity.
TEST_P(DepthwiseKernel, SigmoidAndSiluSaturate) {
    for (const PostOps &post : {PostOps{{"sigmoid"}}, PostOps{{"silu"}}})
        check_case(cases()[9], GetParam(), post, "1", true, 300.0);
}

// An unbatched 3-D input and a contiguous (not channels-last) one take the kernel too.
TEST_P(DepthwiseKernel, UnbatchedAndContiguousInputs) {
    const std::string dtype = GetParam();
    const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
    const ConvParams p = params({1, 1}, {1, 1}, {1, 1}, 20);
    const at::Tensor w = (at::randn({20, 1, 3, 3}) * 0.3).to(type);
    KernelChoice env("1");
    ConvolutionContext ctx(w, c10::nullopt, p, dtype, {{"relu"}}, false, {});
    ASSERT_TRUE(ctx.has_depthwise_kernel());
    const at::Tensor x = at::randn({20, 9, 10}).to(type);
    const at::Tensor want = at::relu(testing::reference_conv(x.unsqueeze(0).to(at::kDouble), w, {}, p));
    const at::Tensor got = ctx.run(x, c10::nullopt);
    ASSERT_EQ(got.dim(), 3);
    expect_dtype_close(got, want.squeeze(0), dtype, "unbatched");
    expect_dtype_close(ctx.run(x.unsqueeze(0).contiguous(), c10::nullopt), want, dtype, "contiguous");
}

// The kernel and oneDNN compute the same convolution: bf16 outputs differ by at most one
// rounding step of bf16 (their fp32 sums differ in order only).
TEST_P(DepthwiseKernel, AgreesWithOneDnn) {
    const std::string dtype = GetParam();
    const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
    const DwCase c = cases()[18];
    const at::Tensor w = (at::randn({c.c, 1, c.kh, c.kw}) * 0.3).to(type), b = at::randn({c.c}).to(type);
    const at::Tensor x = testing::as_channels_last(at::randn({c.n, c.c, c.h, c.w}).to(type));
    at::Tensor outputs[2];
    for (int own = 0; own < 2; ++own) {
        KernelChoice env(own ? "1" : "0");
        ConvolutionContext ctx(w, b, c.params, dtype, {{"silu"}}, false, {});
        ASSERT_EQ(ctx.has_depthwise_kernel(), own == 1);
        outputs[own] = ctx.run(x, c10::nullopt).to(at::kDouble);
    }
    const double bound = dtype == "bf16" ? 1.0 / 128 : 1e-5;
    EXPECT_LE(((outputs[1] - outputs[0]).abs() - outputs[0].abs() * bound).max().item<double>(), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DepthwiseKernel, ::testing::Values("fp32", "bf16"));

// Convolutions the kernel does not compute stay on oneDNN, with the same results.
TEST(DepthwiseKernelScope, OtherConvolutionsStayOnOneDnn) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(1);
    const DwCase dw = cases()[0];
    check_case(dw, "bf16", {{"gelu_erf"}}, "1", false);  // a post-op the kernel lacks
    check_case(dw, "fp32", {{"relu"}}, "0", false);       // turned off
    {
        KernelChoice env("1");
        // bf16 math with an fp32 output.
        EXPECT_FALSE(ConvolutionContext(at::randn({8, 1, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 8),
                                        "bf32", {}, false, {})
                         .has_depthwise_kernel());
        // A channel multiplier of 2, a 1-D and a grouped (not depthwise) convolution.
        EXPECT_FALSE(ConvolutionContext(at::randn({8, 1, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 4),
                                        "bf16", {}, false, {})
                         .has_depthwise_kernel());
        EXPECT_FALSE(ConvolutionContext(at::randn({8, 1, 3}), c10::nullopt,
                                        ConvParams{{1}, {1}, {1}, {0}, 8, false}, "bf16", {}, false, {})
                         .has_depthwise_kernel());
        EXPECT_FALSE(ConvolutionContext(at::randn({8, 2, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 4),
                                        "bf16", {}, false, {})
                         .has_depthwise_kernel());
        // A residual sum is oneDNN's post-op.
        EXPECT_FALSE(ConvolutionContext(at::randn({8, 1, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 8),
                                        "bf16", {{"sum", 1.0}}, false, {})
                         .has_depthwise_kernel());
        // Appending an activation the kernel lacks moves the convolution back to oneDNN.
        ConvolutionContext ctx(at::randn({8, 1, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 8), "bf16",
                               {{"relu"}}, false, {});
        EXPECT_TRUE(ctx.has_depthwise_kernel());
        EXPECT_FALSE(ctx.with_post_ops({{"tanh"}}, false)->has_depthwise_kernel());
        EXPECT_TRUE(ctx.with_post_ops({{"clip", 0.0, 6.0}}, false)->has_depthwise_kernel());
    }
}

// The timed choice (the default): whichever path it picks, the result is the convolution, and
// the second call on a shape gives the first call's bits (the choice is kept per shape).
TEST(DepthwiseKernelScope, TimedChoiceIsKeptPerShape) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(2);
    KernelChoice env(nullptr);
    const DwCase c = cases()[14];
    const at::Tensor w = (at::randn({c.c, 1, c.kh, c.kw}) * 0.3).to(at::kBFloat16);
    ConvolutionContext ctx(w, c10::nullopt, c.params, "bf16", {{"silu"}}, false, {});
    ASSERT_TRUE(ctx.has_depthwise_kernel());
    const at::Tensor x = testing::as_channels_last(at::randn({c.n, c.c, c.h, c.w}).to(at::kBFloat16));
    const at::Tensor first = ctx.run(x, c10::nullopt);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(ctx.run(x, c10::nullopt).equal(first));
    const at::Tensor want = at::silu(testing::reference_conv(x.to(at::kDouble), w, {}, c.params));
    expect_dtype_close(first, want, "bf16", "timed");
}

TEST(DepthwiseKernelScope, ChoiceFromTimingsAndEnvironment) {
    using own_kernels::Choice;
    const double own_fast[] = {3.0, 1.0, 2.0}, onednn[] = {2.0, 1.5, 2.5}, own_tie[] = {1.5, 1.6, 9.0};
    EXPECT_TRUE(own_kernels::prefer_own(own_fast, onednn, 3));   // best 1.0 < 1.5
    EXPECT_FALSE(own_kernels::prefer_own(own_tie, onednn, 3));   // a tie keeps oneDNN
    EXPECT_FALSE(own_kernels::prefer_own(onednn, own_fast, 3));
    EXPECT_TRUE(own_kernels::prefer_own(own_fast + 1, onednn + 1, 1));
    EXPECT_THROW(own_kernels::prefer_own(own_fast, onednn, 0), c10::Error);
    EXPECT_EQ(own_kernels::choice_from_env(nullptr), Choice::timed);
    EXPECT_EQ(own_kernels::choice_from_env(""), Choice::timed);
    EXPECT_EQ(own_kernels::choice_from_env("auto"), Choice::timed);
    EXPECT_EQ(own_kernels::choice_from_env("0"), Choice::onednn);
    EXPECT_EQ(own_kernels::choice_from_env("1"), Choice::own);
    EXPECT_THROW(own_kernels::choice_from_env("yes"), c10::Error);
}

// The bf16 interior path's weight: pairs of kernel rows in the lane order VPUNPCKL/HWD give
// two rows of 32 channels, zeros past the channels and past the last row.
TEST(DepthwiseKernelScope, WeightPairsLayout) {
    const int64_t kh = 3, kw = 2, c = 40, blocks = 2;  // c = 40: one block of 32 and a tail
    std::vector<float> w(kh * kw * c);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);  // exact in bf16 up to 256
    ASSERT_EQ(own_kernels::weight_pairs_blocks(c), blocks);
    EXPECT_EQ(own_kernels::weight_pairs_blocks(144), 6);  // 5 blocks of 32, rounded up to pairs of blocks
    EXPECT_EQ(own_kernels::weight_pairs_blocks(32), 2);
    // Packed only for the interior path that reads it: stride 1, dilation 1, 3 or 5 wide.
    EXPECT_TRUE(own_kernels::weight_pairs_used(3, 1, 1));
    EXPECT_TRUE(own_kernels::weight_pairs_used(5, 1, 1));
    EXPECT_FALSE(own_kernels::weight_pairs_used(3, 2, 1));
    EXPECT_FALSE(own_kernels::weight_pairs_used(5, 1, 2));
    EXPECT_FALSE(own_kernels::weight_pairs_used(7, 1, 1));
    ASSERT_EQ(own_kernels::weight_pairs_size(kh, kw, c), 2 * kh * kw * blocks * 64);
    std::vector<uint16_t> packed(own_kernels::weight_pairs_size(kh, kw, c), 0xFFFF);
    own_kernels::pack_weight_pairs(w.data(), kh, kw, c, packed.data());
    auto value = [](uint16_t bits) {
        const uint32_t u = uint32_t(bits) << 16;
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
    };
    auto tap = [&](int64_t h, int64_t x, int64_t ch) { return w[(h * kw + x) * c + ch]; };
    for (int64_t s = 0; s < 2; ++s)
        for (int64_t h = 0; h < kh; ++h)
            for (int64_t x = 0; x < kw; ++x)
                for (int64_t b = 0; b < blocks; ++b)
                    for (int half = 0; half < 2; ++half)
                        for (int j = 0; j < 16; ++j) {
                            const int64_t ch = 32 * b + 8 * (j / 4) + 4 * half + j % 4;
                            const size_t at = ((((s * kh + h) * kw + x) * blocks + b) * 64) + half * 32 + 2 * j;
                            const float first = ch < c ? tap(h, x, ch) : 0.f;
                            const float second = ch < c && s == 0 && h + 1 < kh ? tap(h + 1, x, ch) : 0.f;
                            EXPECT_EQ(value(packed[at]), first) << s << " " << h << " " << x << " " << ch;
                            EXPECT_EQ(value(packed[at + 1]), second) << s << " " << h << " " << x << " " << ch;
                        }
}

TEST(DepthwiseKernelScope, PostOpNames) {
    own_kernels::Act act;
    for (const char *kind : {"relu", "leaky_relu", "clip", "silu", "sigmoid", "hardswish"})
        EXPECT_TRUE(own_kernels::to_act(kind, &act)) << kind;
    for (const char *kind : {"gelu_erf", "gelu_tanh", "tanh", "elu", "sum", "add", "mul", ""})
        EXPECT_FALSE(own_kernels::to_act(kind, &act)) << kind;
}

// ---- the pointwise kernel: 1x1 bf16 convolutions with their post-ops ----

struct PwCase {
    int64_t n, k, out, h, w;
    bool bias;
};

TEST(PointwiseKernel, MatchesTheFp64Reference) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(7);
    // Input channels: one, a pair, odd (the last paired with zero), up to several hundred;
    // output channels: below, at and past whole vectors of 16 and tiles of 64; pixel counts
    // that leave 1 to 5 rows after the blocks of 6.
    std::vector<PwCase> cases;
    for (int64_t k : {1, 2, 3, 16, 17, 40, 100, 300})
        for (int64_t out : {1, 8, 16, 17, 48, 64, 65, 100}) cases.push_back({2, k, out, 5, 7, k % 2 == 0});
    cases.push_back({1, 24, 144, 1, 1, true});   // one pixel
    cases.push_back({3, 40, 96, 13, 11, true});  // 429 pixels: 3 after the blocks
    cases.push_back({1, 8, 20, 1, 5, false});    // fewer pixels than a block
    const std::vector<PostOps> posts = {{}, {{"relu"}}, {{"silu"}}, {{"clip", -1.0, 2.0}, {"sigmoid"}},
                                        {{"hardswish"}}, {{"leaky_relu", 0.1}}};
    KernelChoice env("1");
    for (const std::string dtype : {"fp32", "bf16"})
    for (const auto &c : cases) {
        const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
        const at::Tensor w = (at::randn({c.out, c.k, 1, 1}) / std::sqrt(double(c.k))).to(type);
        const at::Tensor b = c.bias ? at::randn({c.out}).to(type) : at::Tensor();
        const at::Tensor x = testing::as_channels_last(at::randn({c.n, c.k, c.h, c.w}).to(type));
        const ConvParams p = params({1, 1}, {0, 0}, {1, 1}, 1);
        const at::Tensor conv = testing::reference_conv(x.to(at::kDouble), w, b, p);
        for (const auto &post : posts) {
            std::ostringstream what;
            what << dtype << " " << c.n << "x" << c.k << "x" << c.h << "x" << c.w << " -> " << c.out
                 << (c.bias ? " bias " : " ") << ops::describe(post);
            ConvolutionContext ctx(w, b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt, p, dtype, post,
                                   false, {});
            ASSERT_TRUE(ctx.has_pointwise_kernel()) << what.str();
            const at::Tensor got = ctx.run(x, c10::nullopt);
            EXPECT_EQ(got.scalar_type(), type) << what.str();
            EXPECT_TRUE(testing::channels_last(got)) << what.str();
            if (dtype == "bf16")
                expect_dtype_close(got, reference_post_ops(conv, post), dtype, what.str());
            else  // sums of up to 300 products
                expect_elementwise(got, reference_post_ops(conv, post), 1e-5, 1e-5, what.str());
        }
    }
}

TEST(PointwiseKernel, LargeSumsSaturateAndOtherLayouts) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(8);
    KernelChoice env("1");
    const ConvParams p = params({1, 1}, {0, 0}, {1, 1}, 1);
    const at::Tensor w = at::randn({40, 64, 1, 1}).to(at::kBFloat16);
    ConvolutionContext ctx(w, c10::nullopt, p, "bf16", {{"sigmoid"}}, false, {});
    // Sums of magnitude up to some hundreds: sigmoid saturates to 0 and 1, no NaN.
    const at::Tensor big = (at::randn({2, 64, 6, 5}) * 40).to(at::kBFloat16);
    expect_elementwise(ctx.run(testing::as_channels_last(big), c10::nullopt),
                       at::sigmoid(testing::reference_conv(big.to(at::kDouble), w, {}, p)), 1.0 / 256, 1e-5,
                       "saturated sigmoid");
    // An unbatched input, and a contiguous (not channels-last) fp32 one, converted on entry.
    const at::Tensor x = at::randn({64, 7, 9});
    const at::Tensor want = at::sigmoid(testing::reference_conv(x.unsqueeze(0).to(at::kBFloat16).to(at::kDouble), w,
                                                                {}, p)).squeeze(0);
    expect_elementwise(ctx.run(x, c10::nullopt), want, 1.0 / 256, 1e-5, "unbatched fp32 input");
}

TEST(PointwiseKernel, OtherConvolutionsStayOnOneDnn) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    KernelChoice env("1");
    const at::Tensor w1 = at::randn({16, 8, 1, 1});
    const auto has = [](const at::Tensor &w, const ConvParams &p, const std::string &dtype, const PostOps &post) {
        return ConvolutionContext(w, c10::nullopt, p, dtype, post, false, {}).has_pointwise_kernel();
    };
    EXPECT_TRUE(has(w1, params({1, 1}, {0, 0}, {1, 1}, 1), "bf16", {}));
    EXPECT_TRUE(has(w1, params({1, 1}, {0, 0}, {2, 2}, 1), "bf16", {{"relu"}}));  // dilation is moot at 1x1
    EXPECT_FALSE(has(w1, params({2, 2}, {0, 0}, {1, 1}, 1), "bf16", {}));         // stride
    EXPECT_FALSE(has(w1, params({1, 1}, {1, 1}, {1, 1}, 1), "bf16", {}));         // padding
    EXPECT_FALSE(has(at::randn({16, 4, 1, 1}), params({1, 1}, {0, 0}, {1, 1}, 2), "bf16", {}));  // groups
    EXPECT_FALSE(has(at::randn({16, 8, 3, 3}), params({1, 1}, {1, 1}, {1, 1}, 1), "bf16", {}));  // 3x3
    EXPECT_TRUE(has(w1, params({1, 1}, {0, 0}, {1, 1}, 1), "fp32", {}));
    EXPECT_FALSE(has(w1, params({1, 1}, {0, 0}, {1, 1}, 1), "bf32", {}));  // bf16 math, fp32 output
    EXPECT_FALSE(has(at::randn({16, 4097, 1, 1}), params({1, 1}, {0, 0}, {1, 1}, 1), "bf16", {}));  // input channels
    EXPECT_FALSE(has(w1, params({1, 1}, {0, 0}, {1, 1}, 1), "bf16", {{"gelu_erf"}}));
    EXPECT_TRUE(has(w1, params({1, 1}, {0, 0}, {1, 1}, 1), "bf16", {{"sum", 1.0}, {"relu"}}));
    EXPECT_FALSE(has(w1, params({1, 1}, {0, 0}, {1, 1}, 1), "bf16", {{"relu"}, {"sum", 1.0}}));  // sum after
    EXPECT_FALSE(has(at::randn({16, 8, 1}), ConvParams{{1}, {0}, {1}, {0}, 1, false}, "bf16", {}));  // 1-D
    EXPECT_FALSE(has(at::randn({8, 16, 1, 1}), ConvParams{{1, 1}, {0, 0}, {1, 1}, {0, 0}, 1, true}, "bf16", {}));
    {
        KernelChoice off("0");
        EXPECT_FALSE(has(w1, params({1, 1}, {0, 0}, {1, 1}, 1), "bf16", {}));
    }
    // A residual sum appended later is the kernel's when it comes first, oneDNN's after an
    // activation.
    ConvolutionContext ctx(w1, c10::nullopt, params({1, 1}, {0, 0}, {1, 1}, 1), "bf16", {}, false, {});
    EXPECT_TRUE(ctx.has_pointwise_kernel());
    EXPECT_TRUE(ctx.with_post_ops({{"sum", 1.0}}, false)->has_pointwise_kernel());
    ConvolutionContext relu(w1, c10::nullopt, params({1, 1}, {0, 0}, {1, 1}, 1), "bf16", {{"relu"}}, false, {});
    EXPECT_FALSE(relu.with_post_ops({{"sum", 1.0}}, false)->has_pointwise_kernel());
}

// A residual sum first in the post-ops (ResNet bottlenecks' last 1x1 convolution): scaled,
// before the activations, into the summand's own buffer or into a copy (the summand then
// unchanged), output channels with a vector tail and pixels after the blocks of 6, fp32 and
// bf16, against fp64.
TEST(PointwiseKernel, ResidualSum) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(9);
    KernelChoice env("1");
    const ConvParams p = params({1, 1}, {0, 0}, {1, 1}, 1);
    const std::vector<std::pair<PwCase, PostOps>> runs = {
        {{2, 64, 256, 7, 5, true}, {{"sum", 1.0}, {"relu"}}},
        {{1, 17, 40, 3, 3, false}, {{"sum", 0.5}}},
        {{3, 40, 100, 5, 5, true}, {{"sum", 2.0}, {"clip", -0.5, 0.75}, {"silu"}}}};
    for (const std::string dtype : {"fp32", "bf16"})
        for (const auto &[c, post] : runs) {
            const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
            const at::Tensor w = (at::randn({c.out, c.k, 1, 1}) / std::sqrt(double(c.k))).to(type);
            const at::Tensor b = c.bias ? at::randn({c.out}).to(type) : at::Tensor();
            const at::Tensor x = testing::as_channels_last(at::randn({c.n, c.k, c.h, c.w}).to(type));
            const at::Tensor other = testing::as_channels_last(at::randn({c.n, c.out, c.h, c.w}).to(type));
            const at::Tensor conv = testing::reference_conv(x.to(at::kDouble), w, b, p);
            const at::Tensor want =
                reference_post_ops(conv + post[0].alpha * other.to(at::kDouble), PostOps(post.begin() + 1, post.end()));
            std::ostringstream what;
            what << dtype << " " << c.n << "x" << c.k << "x" << c.h << "x" << c.w << " -> " << c.out << " "
                 << ops::describe(post);
            ConvolutionContext ctx(w, b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt, p, dtype, post, true,
                                   {});
            ASSERT_TRUE(ctx.has_pointwise_kernel()) << what.str();
            const at::Tensor kept = other.clone();
            const at::Tensor copy = ctx.run(x, other, /*may_write_other=*/false);
            EXPECT_TRUE(other.equal(kept)) << what.str() << ": the summand was written";
            expect_dtype_close(copy, want, dtype, what.str() + " (a copy)");
            const at::Tensor in_place = ctx.run(x, other);
            EXPECT_EQ(in_place.data_ptr(), other.data_ptr()) << what.str();
            expect_dtype_close(in_place, want, dtype, what.str() + " (in place)");
        }
}

// ---- the split: oneDNN's convolution, then the trailing activation in the own kernel ----

struct SplitCase {
    std::string name;
    int64_t in, out, k, groups;
    PostOps post;
    bool splits;  // with IPEX_CONV_KERNELS=1
};

TEST(ConvSplitActivation, WhichConvolutionsSplitAndTheirResults) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(3);
    const std::vector<SplitCase> cases = {
        {"1x1 silu", 16, 96, 1, 1, {{"silu"}}, true},
        {"3x3 sigmoid", 12, 40, 3, 1, {{"sigmoid"}}, true},
        {"clip then silu (both split)", 24, 36, 1, 1, {{"clip", -2.0, 2.0}, {"silu"}}, true},
        {"gelu kept, silu split", 8, 20, 3, 1, {{"gelu_erf"}, {"silu"}}, true},
        {"grouped silu (20 outputs per group: no own grouped kernel)", 32, 40, 3, 2, {{"silu"}}, true},
        {"relu only: no exp to move", 16, 32, 1, 1, {{"relu"}}, false},
        {"silu then gelu: the last op is oneDNN's", 16, 32, 1, 1, {{"silu"}, {"gelu_erf"}}, false},
        {"no post-op", 16, 32, 1, 1, {}, false},
    };
    for (const std::string dtype : {"fp32", "bf16"}) {
        const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
        for (const auto &c : cases) {
            const ConvParams p = params({1, 1}, {c.k / 2, c.k / 2}, {1, 1}, c.groups);
            const at::Tensor w = (at::randn({c.out, c.in / c.groups, c.k, c.k}) * 0.3).to(type);
            const at::Tensor b = at::randn({c.out}).to(type);
            const at::Tensor x = at::randn({2, c.in, 11, 13}).to(type);
            const at::Tensor want = reference_post_ops(testing::reference_conv(x.to(at::kDouble), w, b, p), c.post);
            KernelChoice env("1");
            ConvolutionContext ctx(w, b, p, dtype, c.post, false, {});
            // A 1x1 convolution takes the own pointwise kernel, activation included.
            const bool pointwise = c.k == 1 && c.groups == 1 && c.post.size() <= 4 &&
                                   std::none_of(c.post.begin(), c.post.end(), [](const PostOp &op) {
                                       return op.kind == "gelu_erf";
                                   });
            EXPECT_EQ(ctx.has_pointwise_kernel(), pointwise) << dtype << " " << c.name;
            EXPECT_EQ(ctx.has_split_activation(), c.splits && !pointwise) << dtype << " " << c.name;
            const at::Tensor got = ctx.run(x, c10::nullopt);
            EXPECT_EQ(got.scalar_type(), type) << c.name;
            EXPECT_TRUE(testing::channels_last(got)) << c.name;
            // A split bf16 convolution rounds its output to bf16 before the activation, as an
            // unfused bf16 graph does: one more rounding of 2^-9.
            if (dtype == "bf16")
                expect_elementwise(got, want, 1.0 / 128, 1e-3, dtype + " " + c.name);
            else
                expect_elementwise(got, want, 1e-5, 2e-6, dtype + " " + c.name);
        }
    }
}

TEST(ConvSplitActivation, OffAndOtherShapes) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    const ConvParams p = params({1, 1}, {0, 0}, {1, 1}, 1);
    const at::Tensor w = at::randn({32, 16, 1, 1});
    {
        KernelChoice env("0");
        EXPECT_FALSE(ConvolutionContext(w, c10::nullopt, p, "bf16", {{"silu"}}, false, {}).has_split_activation());
    }
    KernelChoice env("1");
    // A residual sum stays fused in oneDNN, and so does what follows it.
    EXPECT_FALSE(ConvolutionContext(w, c10::nullopt, p, "bf16", {{"sum", 1.0}, {"silu"}}, false, {})
                     .has_split_activation());
    // bf16 math with an fp32 output.
    EXPECT_FALSE(ConvolutionContext(w, c10::nullopt, p, "bf32", {{"silu"}}, false, {}).has_split_activation());
    // A depthwise convolution runs its activation inside the depthwise kernel instead.
    ConvolutionContext dw(at::randn({16, 1, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 16), "bf16",
                          {{"silu"}}, false, {});
    EXPECT_TRUE(dw.has_depthwise_kernel());
    EXPECT_FALSE(dw.has_split_activation());
    // Appending a SiLU splits; the copy with another dtype plans again.
    ConvolutionContext plain(w, c10::nullopt, p, "bf16", {}, false, {});
    EXPECT_FALSE(plain.has_split_activation());
    EXPECT_TRUE(plain.with_post_ops({{"silu"}}, false)->has_pointwise_kernel());
    ConvolutionContext plain3(at::randn({32, 16, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 1), "bf16", {},
                              false, {});
    EXPECT_FALSE(plain3.has_split_activation());
    EXPECT_TRUE(plain3.with_post_ops({{"silu"}}, false)->has_split_activation());
    // The unfused path of a broadcast sum (prefix convolution, aten's add, then the rest).
    ConvolutionContext summed(w, c10::nullopt, p, "fp32", {{"silu"}, {"sum", 1.0}, {"relu"}}, false, {});
    const at::Tensor x = at::randn({2, 16, 5, 6}), other = at::randn({1, 32, 1, 1});
    const at::Tensor want = at::relu(at::silu(testing::reference_conv(x, w, {}, p)) + other.to(at::kDouble));
    expect_elementwise(summed.run(x, other), want, 1e-5, 2e-6, "broadcast sum");
}

// The timed choice keeps one path per shape: repeated calls give the same bits.
TEST(ConvSplitActivation, TimedChoiceIsKeptPerShape) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    at::manual_seed(4);
    KernelChoice env("auto");
    const ConvParams p = params({1, 1}, {1, 1}, {1, 1}, 1);
    const at::Tensor w = (at::randn({96, 16, 3, 3}) * 0.3).to(at::kBFloat16);
    ConvolutionContext ctx(w, c10::nullopt, p, "bf16", {{"silu"}}, false, {});
    ASSERT_TRUE(ctx.has_split_activation());
    const at::Tensor x = testing::as_channels_last(at::randn({2, 16, 28, 28}).to(at::kBFloat16));
    const at::Tensor first = ctx.run(x, c10::nullopt);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(ctx.run(x, c10::nullopt).equal(first));
    expect_elementwise(first, at::silu(testing::reference_conv(x.to(at::kDouble), w, {}, p)), 1.0 / 128, 1e-3,
                       "timed");
}

// Recorded choices (optimize --auto-kernel-selection): a recorded shape runs the recorded way
// in every context holding the record, whatever timing would say; IPEX_CONV_KERNELS=0/1 still
// decides over it; records survive the saved state and not a change of post-ops or dtype.
// The bits of the two ways differ (the depthwise kernel sums in another order, the split
// rounds before the activation), so the bits show which way ran.
struct ChoiceCase {
    std::string name;
    at::Tensor weight;
    ConvParams params;
    PostOps post;
    std::vector<int64_t> shape_a, shape_b;
};

std::vector<ChoiceCase> choice_cases() {
    at::manual_seed(6);
    return {
        {"depthwise silu", (at::randn({40, 1, 3, 3}) * 0.3).to(at::kBFloat16), params({1, 1}, {1, 1}, {1, 1}, 40),
         {{"silu"}}, {2, 40, 14, 14}, {1, 40, 9, 21}},
        {"3x3 silu (split)", (at::randn({48, 16, 3, 3}) * 0.3).to(at::kBFloat16), params({1, 1}, {1, 1}, {1, 1}, 1),
         {{"silu"}}, {2, 16, 14, 14}, {1, 16, 9, 21}},
        {"1x1 silu (pointwise)", (at::randn({48, 16, 1, 1}) * 0.3).to(at::kBFloat16),
         params({1, 1}, {0, 0}, {1, 1}, 1), {{"silu"}}, {2, 16, 14, 14}, {1, 16, 9, 21}},
    };
}

// The output of `c` at `shape` with IPEX_CONV_KERNELS=`choice` (a fresh context).
at::Tensor forced(const ChoiceCase &c, const at::Tensor &x, const char *choice) {
    KernelChoice env(choice);
    return ConvolutionContext(c.weight, c10::nullopt, c.params, "bf16", c.post, false, {}).run(x, c10::nullopt);
}

TEST(RecordedKernelChoice, DecidesTheShapeAndIsSaved) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    for (const auto &c : choice_cases()) {
        const at::Tensor xa = testing::as_channels_last(at::randn(c.shape_a).to(at::kBFloat16));
        const at::Tensor xb = testing::as_channels_last(at::randn(c.shape_b).to(at::kBFloat16));
        const at::Tensor own_a = forced(c, xa, "1"), onednn_a = forced(c, xa, "0");
        const at::Tensor own_b = forced(c, xb, "1"), onednn_b = forced(c, xb, "0");
        ASSERT_FALSE(own_a.equal(onednn_a)) << c.name << ": the two ways give the same bits; the test shows nothing";
        ASSERT_FALSE(own_b.equal(onednn_b)) << c.name;

        KernelChoice env("auto");
        ConvolutionContext ctx(c.weight, c10::nullopt, c.params, "bf16", c.post, false, {});
        ASSERT_TRUE(ctx.has_kernel_choice()) << c.name;
        ctx.record_kernel(c.shape_a, true);
        ctx.record_kernel(c.shape_b, false);
        ctx.record_kernel(c.shape_b, true);  // replaces the first record of shape b
        ctx.record_kernel(c.shape_b, false);
        ASSERT_EQ(ctx.recorded_kernels().size(), 2u) << c.name;
        EXPECT_TRUE(ctx.run(xa, c10::nullopt).equal(own_a)) << c.name;
        EXPECT_TRUE(ctx.run(xb, c10::nullopt).equal(onednn_b)) << c.name;

        // The saved state carries the records: a loaded context runs the same way.
        const auto state = ctx.state();
        EXPECT_EQ(std::get<14>(state), (std::vector<std::vector<int64_t>>{
                                           {1, c.shape_a[0], c.shape_a[1], c.shape_a[2], c.shape_a[3]},
                                           {0, c.shape_b[0], c.shape_b[1], c.shape_b[2], c.shape_b[3]}}))
            << c.name;
        const auto back = ConvolutionContext::from_state(state);
        EXPECT_EQ(back->recorded_kernels(), ctx.recorded_kernels()) << c.name;
        EXPECT_TRUE(back->run(xa, c10::nullopt).equal(own_a)) << c.name;
        EXPECT_TRUE(back->run(xb, c10::nullopt).equal(onednn_b)) << c.name;
        {
            // The variable decides over a record, in a context loaded under it.
            KernelChoice off("0");
            EXPECT_TRUE(ConvolutionContext::from_state(state)->run(xa, c10::nullopt).equal(onednn_a)) << c.name;
            KernelChoice on("1");
            EXPECT_TRUE(ConvolutionContext::from_state(state)->run(xb, c10::nullopt).equal(own_b)) << c.name;
        }
        // Another dtype or more post-ops make another convolution: no records.
        EXPECT_TRUE(ctx.with_post_ops({{"clip", -1.0, 1.0}}, false)->recorded_kernels().empty()) << c.name;
        EXPECT_TRUE(ctx.with_dtype("bf16")->recorded_kernels().empty()) << c.name;
        EXPECT_THROW(ctx.record_kernel({2, c.shape_a[1], 14}, true), c10::Error) << c.name;
    }
}

TEST(RecordedKernelChoice, PointwiseWeightIsPackedOnlyWhenItsKernelRuns) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    KernelChoice env("auto");
    const auto c = choice_cases()[2];
    ASSERT_EQ(c.name, std::string("1x1 silu (pointwise)"));
    ConvolutionContext ctx(c.weight, c10::nullopt, c.params, "bf16", c.post, false, {});
    ASSERT_TRUE(ctx.has_pointwise_kernel());
    EXPECT_EQ(ctx.pointwise_weight_bytes(), 0u);
    ctx.record_kernel(c.shape_a, false);
    ctx.record_kernel(c.shape_b, true);
    const at::Tensor xa = testing::as_channels_last(at::randn(c.shape_a).to(at::kBFloat16));
    const at::Tensor xb = testing::as_channels_last(at::randn(c.shape_b).to(at::kBFloat16));
    EXPECT_TRUE(ctx.run(xa, c10::nullopt).equal(forced(c, xa, "0")));
    EXPECT_EQ(ctx.pointwise_weight_bytes(), 0u) << "packed for a shape that runs oneDNN's way";
    EXPECT_TRUE(ctx.run(xb, c10::nullopt).equal(forced(c, xb, "1")));
    // 48 output channels (3 x 16) by 16 input channels, bf16
    EXPECT_EQ(ctx.pointwise_weight_bytes(), 48u * 16u * 2u);
    EXPECT_TRUE(ctx.run(xb, c10::nullopt).equal(forced(c, xb, "1")));
    EXPECT_EQ(ctx.pointwise_weight_bytes(), 48u * 16u * 2u);
}

TEST(RecordedKernelChoice, ChooseKernelTimesBothAndRecords) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    KernelChoice env("auto");
    for (const auto &c : choice_cases()) {
        ConvolutionContext ctx(c.weight, c10::nullopt, c.params, "bf16", c.post, false, {});
        const auto chosen = ctx.choose_kernel(c.shape_a, 2);
        EXPECT_EQ(chosen.input_sizes, c.shape_a);
        EXPECT_GT(chosen.own_ms, 0.0) << c.name;
        EXPECT_GT(chosen.onednn_ms, 0.0) << c.name;
        EXPECT_EQ(chosen.own, chosen.own_ms < chosen.onednn_ms) << c.name;
        ASSERT_EQ(ctx.recorded_kernels().size(), 1u);
        EXPECT_EQ(ctx.recorded_kernels()[0].first, c.shape_a);
        EXPECT_EQ(ctx.recorded_kernels()[0].second, chosen.own);
        const at::Tensor x = testing::as_channels_last(at::randn(c.shape_a).to(at::kBFloat16));
        EXPECT_TRUE(ctx.run(x, c10::nullopt).equal(forced(c, x, chosen.own ? "1" : "0"))) << c.name;
        // Shapes that are not this convolution's input, and no timed run.
        EXPECT_THROW(ctx.choose_kernel({2, c.shape_a[1] + 1, 14, 14}, 2), c10::Error) << c.name;
        EXPECT_THROW(ctx.choose_kernel({2, c.shape_a[1], 14}, 2), c10::Error) << c.name;
        EXPECT_THROW(ctx.choose_kernel({0, c.shape_a[1], 14, 14}, 2), c10::Error) << c.name;
        EXPECT_THROW(ctx.choose_kernel(c.shape_a, 0), c10::Error) << c.name;
    }
    // A convolution without an own kernel has nothing to choose (5 input channels: no stem).
    ConvolutionContext plain(at::randn({8, 5, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 1), "bf16",
                             {{"relu"}}, false, {});
    EXPECT_FALSE(plain.has_kernel_choice());
    EXPECT_THROW(plain.choose_kernel({1, 5, 8, 8}, 2), c10::Error);
}

TEST(RecordedKernelChoice, ShapeLogSeesShapesAndRunsOneDnn) {
    if (!kernel_runs("bf16")) GTEST_SKIP() << "this CPU lacks AVX-512-BF16";
    KernelChoice env("auto");
    const auto c = choice_cases()[0];
    ConvolutionContext ctx(c.weight, c10::nullopt, c.params, "bf16", c.post, false, {});
    ConvolutionContext other(c.weight, c10::nullopt, c.params, "bf16", c.post, false, {});
    const at::Tensor xa = testing::as_channels_last(at::randn(c.shape_a).to(at::kBFloat16));
    const at::Tensor xb = testing::as_channels_last(at::randn(c.shape_b).to(at::kBFloat16));
    {
        KernelShapeLog log;
        EXPECT_EQ(KernelShapeLog::active(), &log);
        EXPECT_THROW(KernelShapeLog second, c10::Error);
        EXPECT_TRUE(ctx.run(xa, c10::nullopt).equal(forced(c, xa, "0")));
        ctx.run(xb, c10::nullopt);
        ctx.run(xa, c10::nullopt);
        // Unbatched input: the batched shape is logged.
        ctx.run(xb.squeeze(0), c10::nullopt);
        EXPECT_EQ(log.shapes_of(&ctx), (std::vector<std::vector<int64_t>>{c.shape_a, c.shape_b}));
        EXPECT_TRUE(log.shapes_of(&other).empty());
    }
    EXPECT_EQ(KernelShapeLog::active(), nullptr);
    EXPECT_TRUE(ctx.recorded_kernels().empty());
}

}  // namespace
}  // namespace ipex::ops
