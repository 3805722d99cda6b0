// NaN and infinities through the fused activations of the own convolution kernels
// (own_kernels.h, own_stem.h) against aten's ops on the same values: the pre-activation holds
// NaN, +inf and -inf in some channels (their bias) and ordinary sums in the others (bias values
// from -100 to 100). Each activation the kernels compute must give NaN exactly where aten's op
// gives NaN (relu(NaN) is NaN, silu(-inf) and hardswish(-inf) are NaN), the same infinities,
// and aten's values within the dtype's rounding elsewhere. The depthwise kernel (AVX-512 both
// dtypes, AVX2 fp32), the grouped kernel (AVX-512, AVX2 with ReLU in registers or the other
// post-ops on the stored tile) and its one-group use without AVX-512, the pointwise and stem
// kernels and the activation split after oneDNN's convolution (AVX-512), and a residual sum
// whose summand holds NaN and infinities.
#include <gtest/gtest.h>

#include <limits>
#include <sstream>

#include "ops/conv_context.h"
#include "ops/own_kernels.h"
#include "ops/own_stem.h"
#include "unit/ops/ops_test_utils.h"

namespace ipex::ops {
namespace {

using testing::KernelChoice;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Each activation the own kernels compute (as post_ops.h names them: clip is relu6, hardtanh
// and clamp), and two chains.
std::vector<PostOps> activations() {
    return {{{"relu"}},
            {{"leaky_relu", 0.1}},
            {{"leaky_relu", 0.0}},
            {{"clip", 0.0, 6.0}},
            {{"clip", -1.0, 1.0}},
            {{"hardswish"}},
            {{"sigmoid"}},
            {{"silu"}},
            {{"clip", -0.5, 0.75}, {"silu"}},
            {{"silu"}, {"relu"}}};
}

// Channel c's bias: NaN, +inf, -inf and finite values in turn, so each kind falls in whole
// vectors and in their tails (12 values a cycle against vectors of 8 and 16).
at::Tensor special_bias(int64_t channels, at::ScalarType type) {
    static const float kValues[] = {kNan, kInf, -kInf, -100.f, -5.f, -1.f, -0.25f, 0.f, 0.5f, 2.f, 8.f, 100.f};
    std::vector<float> bias(channels);
    for (int64_t c = 0; c < channels; ++c) bias[c] = kValues[c % 12];
    return at::tensor(bias).to(type);
}

// aten's ops, in order, on the fp64 pre-activation.
at::Tensor aten_activations(at::Tensor y, const PostOps &post) {
    for (const PostOp &op : post) y = testing::reference_eltwise(y, op);
    return y;
}

// got against want (aten's values): NaN at the same places (and some), the same infinities,
// the finite values within the dtype's bound of expect_within_rounding.
void expect_as_aten(const at::Tensor &got, const at::Tensor &want, const std::string &dtype, const std::string &what,
                    double roundings = 1) {
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
    ASSERT_GT(w.isnan().sum().item<int64_t>(), 0) << what << ": aten gives no NaN; the test shows nothing";
    EXPECT_EQ(g.isnan().ne(w.isnan()).sum().item<int64_t>(), 0)
        << what << ": NaN where aten gives none, or a number where aten gives NaN (got "
        << g.isnan().sum().item<int64_t>() << " NaN, aten " << w.isnan().sum().item<int64_t>() << ")";
    const at::Tensor inf = w.isinf();
    EXPECT_TRUE(g.isinf().equal(inf)) << what << ": infinities";
    EXPECT_TRUE(g.masked_select(inf).equal(w.masked_select(inf))) << what << ": the infinities' signs";
    const at::Tensor finite = w.isfinite().logical_and(g.isfinite());
    const at::Tensor gf = g.masked_select(finite), wf = w.masked_select(finite);
    ASSERT_GT(wf.numel(), 0) << what;
    const double scale = std::max(wf.abs().max().item<double>(), 1e-12);
    const double rel = (dtype == "bf16" ? 1.0 / 256 : 1e-5) * roundings, abs = dtype == "bf16" ? 1e-4 : 1e-5;
    const at::Tensor excess = (gf - wf).abs() - (wf.abs() * rel + abs * scale);
    EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": max error " << (gf - wf).abs().max().item<double>();
}

struct Conv {
    std::string name;
    int64_t n, in, out, h, w, kh, kw, groups;
    ConvParams params;
};

ConvParams params(int64_t stride, int64_t padding, int64_t groups) {
    return ConvParams{{stride, stride}, {padding, padding}, {1, 1}, {0, 0}, groups, false};
}

std::string describe(const Conv &c, const std::string &dtype, const PostOps &post) {
    return c.name + " " + dtype + " +" + ops::describe(post);
}

// Which own kernel a context runs, for the assertion that the case reaches it.
enum class Kernel { depthwise, grouped, pointwise, stem, split };

bool runs(const ConvolutionContext &ctx, Kernel k) {
    switch (k) {
        case Kernel::depthwise: return ctx.has_depthwise_kernel();
        case Kernel::grouped: return ctx.has_grouped_kernel();
        case Kernel::pointwise: return ctx.has_pointwise_kernel();
        case Kernel::stem: return ctx.has_stem_kernel();
        case Kernel::split: return ctx.has_split_activation();
    }
    return false;
}

// Runs every activation of `posts` on convolution c with the special bias through kernel k
// (IPEX_CONV_KERNELS=1) and checks the output against aten's ops on the fp64 convolution of the
// same (dtype-rounded) values. `roundings`: 2 where the output is rounded before the activation.
void check_activations(const Conv &c, const std::string &dtype, Kernel k, const std::vector<PostOps> &posts,
                       double roundings = 1) {
    const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
    const at::Tensor w = (at::randn({c.out, c.in / c.groups, c.kh, c.kw}) * 0.3).to(type);
    const at::Tensor b = special_bias(c.out, type);
    // the stem takes fp32 planes and reads their bf16 values
    const at::Tensor planes = at::randn({c.n, c.in, c.h, c.w});
    const at::Tensor x = k == Kernel::stem ? planes : planes.to(type);
    const at::Tensor conv = testing::reference_conv(x.to(type).to(at::kDouble), w, b, c.params);
    for (const PostOps &post : posts) {
        const std::string what = describe(c, dtype, post);
        KernelChoice env("1");
        ConvolutionContext ctx(w, b, c.params, dtype, post, false, {});
        ASSERT_TRUE(runs(ctx, k)) << what << ": not the kernel under test";
        const at::Tensor input = k == Kernel::stem ? x : testing::as_channels_last(x);
        const at::Tensor pre = roundings > 1 ? conv.to(type).to(at::kDouble) : conv;
        expect_as_aten(ctx.run(input, c10::nullopt), aten_activations(pre, post), dtype, what, roundings);
    }
}

class ActivationNan : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { at::manual_seed(0); }
    bool bf16() const { return GetParam() == "bf16"; }
};

TEST_P(ActivationNan, DepthwiseKernel) {
    if (!own_kernels::depthwise_available(bf16())) GTEST_SKIP() << "no depthwise kernel of this dtype on this CPU";
    // 40 channels: passes of 16 with a tail of 8; stride 1 (the bf16 paired interior) and 2.
    for (const Conv &c : {Conv{"dw 3x3", 2, 40, 40, 7, 9, 3, 3, 40, params(1, 1, 40)},
                          Conv{"dw 5x5 s2", 1, 40, 40, 8, 11, 5, 5, 40, params(2, 2, 40)}})
        check_activations(c, GetParam(), Kernel::depthwise, activations());
}

TEST_P(ActivationNan, GroupedKernel) {
    if (!own_kernels::grouped_available(bf16())) GTEST_SKIP() << "no grouped kernel of this dtype on this CPU";
    // Two groups of 16 outputs; ReLU alone takes the AVX2 build's max in registers.
    const Conv c{"grouped 3x3", 2, 32, 32, 6, 13, 3, 3, 2, params(1, 1, 2)};
    check_activations(c, GetParam(), Kernel::grouped, activations());
}

TEST_P(ActivationNan, OneGroupInTheGroupedKernel) {
    if (bf16() || !own_kernels::grouped_available(false) || own_kernels::available(false))
        GTEST_SKIP() << "one-group convolutions take the grouped kernel in fp32 on CPUs without AVX-512";
    const Conv c{"dense 3x3", 1, 24, 48, 7, 9, 3, 3, 1, params(1, 1, 1)};
    check_activations(c, GetParam(), Kernel::grouped, activations());
}

TEST_P(ActivationNan, PointwiseKernel) {
    if (!own_kernels::available(bf16())) GTEST_SKIP() << "the pointwise kernel needs AVX-512 (AVX512-BF16 for bf16)";
    const Conv c{"1x1", 2, 24, 40, 5, 7, 1, 1, 1, params(1, 0, 1)};
    check_activations(c, GetParam(), Kernel::pointwise, activations());
}

// oneDNN's convolution, then the trailing sigmoid or SiLU in the own kernel (run_post_ops);
// bf16 rounds the convolution's output before the activation.
TEST_P(ActivationNan, SplitActivation) {
    if (!own_kernels::available(bf16())) GTEST_SKIP() << "the split needs AVX-512 (AVX512-BF16 for bf16)";
    const Conv c{"3x3 split", 2, 12, 40, 9, 11, 3, 3, 1, params(1, 1, 1)};
    check_activations(c, GetParam(), Kernel::split,
                      {{{"sigmoid"}}, {{"silu"}}, {{"clip", -2.0, 2.0}, {"silu"}}}, bf16() ? 2 : 1);
}

TEST_P(ActivationNan, StemKernel) {
    if (!bf16() || !own_stem::available()) GTEST_SKIP() << "the stem kernel is bf16 on AVX512-BF16";
    const Conv c{"stem 3x3 s2", 1, 3, 40, 9, 11, 3, 3, 1, params(2, 1, 1)};
    check_activations(c, GetParam(), Kernel::stem, activations());
}

// A residual sum before the activation whose summand holds NaN and infinities (the bias is
// finite): the pointwise kernel with AVX-512, the grouped kernel's one-group use without.
TEST_P(ActivationNan, ResidualSumOfNonFiniteSummand) {
    const bool pointwise = own_kernels::available(bf16());
    if (!pointwise && (bf16() || !own_kernels::grouped_available(false)))
        GTEST_SKIP() << "no own kernel takes a residual sum of this dtype on this CPU";
    const at::ScalarType type = bf16() ? at::kBFloat16 : at::kFloat;
    const ConvParams p = params(1, 0, 1);
    const at::Tensor w = (at::randn({48, 24, 1, 1}) * 0.3).to(type), b = at::randn({48}).to(type);
    const at::Tensor x = testing::as_channels_last(at::randn({2, 24, 5, 7}).to(type));
    at::Tensor other = at::randn({2, 48, 5, 7}) * 3;  // 48: whole tiles of 16 (AVX2)
    other.select(1, 0).fill_(kNan);
    other.select(1, 17).fill_(kInf);
    other.select(1, 47).fill_(-kInf);
    other[1][5][2][3] = kNan;
    other = testing::as_channels_last(other.to(type));
    const at::Tensor conv = testing::reference_conv(x.to(at::kDouble), w, b, p) + other.to(at::kDouble);
    for (PostOps post : activations()) {
        post.insert(post.begin(), PostOp{"sum", 1.0});
        const std::string what = std::string("1x1 sum ") + GetParam() + " +" + ops::describe(post);
        KernelChoice env("1");
        ConvolutionContext ctx(w, b, p, GetParam(), post, false, {});
        ASSERT_TRUE(pointwise ? ctx.has_pointwise_kernel() : ctx.has_grouped_kernel()) << what;
        const at::Tensor got = ctx.run(x, other, /*may_write_other=*/false);
        expect_as_aten(got, aten_activations(conv, PostOps(post.begin() + 1, post.end())), GetParam(), what);
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ActivationNan, ::testing::Values("fp32", "bf16"));

}  // namespace
}  // namespace ipex::ops
