// ipex::norm_relu against an fp64 reference (cat along dim 1, times scale plus shift, ReLU)
// over one and several inputs with odd channel counts (vector tails), batch 1 and more, small
// and large images, with and without the ReLU, fp32 and bf16 channels-last inputs; against
// aten's batch_norm + relu too; NaN stays NaN through the ReLU; what the kernel does not take
// (NCHW, mixed dtypes, fp64, other ranks) runs the aten definition, errors included.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "ops/norm_op.h"
#include "ops/own_kernels.h"

namespace ipex::ops {
namespace {

at::Tensor reference(const std::vector<at::Tensor> &xs, const at::Tensor &scale, const at::Tensor &shift, bool relu) {
    std::vector<at::Tensor> wide;
    for (const auto &x : xs) wide.push_back(x.to(at::kDouble));
    std::vector<int64_t> shape(xs[0].dim(), 1);
    shape[1] = -1;
    at::Tensor y = at::cat(wide, 1) * scale.to(at::kDouble).view(shape) + shift.to(at::kDouble).view(shape);
    return relu ? at::relu(y) : y;
}

std::vector<at::Tensor> make_inputs(const std::vector<int64_t> &channels, int64_t n, int64_t h, int64_t w,
                                    at::ScalarType dtype, bool channels_last) {
    std::vector<at::Tensor> xs;
    for (int64_t c : channels) {
        at::Tensor x = (at::randn({n, c, h, w}) * 3).to(dtype);
        xs.push_back(channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast) : x);
    }
    return xs;
}

int64_t total(const std::vector<int64_t> &channels) {
    int64_t t = 0;
    for (int64_t c : channels) t += c;
    return t;
}

TEST(NormRelu, MatchesTheFp64Reference) {
    at::manual_seed(5);
    struct Case {
        std::vector<int64_t> channels;
        int64_t n, h, w;
    };
    const std::vector<Case> cases = {
        {{1}, 1, 1, 1},          {{3}, 2, 5, 7},           {{16}, 1, 4, 4},        {{17, 16, 3}, 2, 3, 5},
        {{64, 32, 32}, 4, 7, 7}, {{130}, 1, 11, 13},       {{32, 32, 32, 32, 32}, 2, 14, 14},
        {{24}, 3, 57, 33},       {{7, 1, 33}, 1, 1, 40},   {{256, 32}, 1, 2, 3}};
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const bool own = own_kernels::available(dtype == at::kBFloat16);
        for (const auto &c : cases) {
            const auto xs = make_inputs(c.channels, c.n, c.h, c.w, dtype, true);
            const at::Tensor scale = at::randn({total(c.channels)}), shift = at::randn({total(c.channels)});
            for (const bool relu : {true, false}) {
                std::ostringstream what;
                what << at::IntArrayRef(c.channels) << " n" << c.n << " " << c.h << "x" << c.w << " " << dtype
                     << (relu ? " relu" : "");
                EXPECT_EQ(norm_relu_uses_own_kernel(xs, scale, shift), own) << what.str();
                const at::Tensor got = norm_relu(xs, scale, shift, relu);
                const at::Tensor want = reference(xs, scale, shift, relu);
                ASSERT_EQ(got.sizes(), want.sizes()) << what.str();
                ASSERT_EQ(got.scalar_type(), dtype) << what.str();
                if (own) EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what.str();
                // fp32: one fused multiply-add; bf16: one rounding (2^-9 relative) of that
                const double rtol = dtype == at::kFloat ? 1e-6 : 1.0 / 256;
                const at::Tensor err = (got.to(at::kDouble) - want).abs();
                const at::Tensor bound = want.abs() * rtol + 1e-6;
                EXPECT_TRUE((err <= bound).all().item<bool>()) << what.str() << ": max error " << err.max().item<double>();
                if (relu) EXPECT_GE(got.min().item<double>(), 0.0) << what.str();
            }
        }
    }
}

// The same numbers as the aten ops it replaces: cat, batch_norm with running statistics, relu.
TEST(NormRelu, MatchesAtenBatchNorm) {
    at::manual_seed(6);
    const std::vector<int64_t> channels = {64, 32, 32, 32};
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const auto xs = make_inputs(channels, 2, 9, 9, dtype, true);
        const int64_t c = total(channels);
        const at::Tensor weight = at::rand({c}) + 0.5, bias = at::randn({c}), mean = at::randn({c}),
                         var = at::rand({c}) + 0.1;
        const double eps = 1e-5;
        const at::Tensor scale = (weight.to(at::kDouble) / at::sqrt(var.to(at::kDouble) + eps)).to(at::kFloat);
        const at::Tensor shift = (bias.to(at::kDouble) - mean.to(at::kDouble) * scale.to(at::kDouble)).to(at::kFloat);
        const at::Tensor want = at::relu(at::batch_norm(at::cat(xs, 1), weight, bias, mean, var, false, 0.1, eps, false));
        const at::Tensor got = norm_relu(xs, scale, shift, true);
        ASSERT_EQ(got.sizes(), want.sizes());
        ASSERT_EQ(got.scalar_type(), want.scalar_type());
        const double tol = dtype == at::kFloat ? 1e-5 : 1.0 / 128;  // bf16: one step either side
        const at::Tensor w = want.to(at::kDouble);
        EXPECT_TRUE(((got.to(at::kDouble) - w).abs() <= w.abs() * tol + 1e-5).all().item<bool>()) << dtype;
    }
}

TEST(NormRelu, NanStaysNan) {
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        auto xs = make_inputs({20}, 1, 2, 2, dtype, true);
        xs[0].index_put_({0, 17, 1, 0}, std::numeric_limits<float>::quiet_NaN());
        xs[0].index_put_({0, 3, 0, 1}, std::numeric_limits<float>::quiet_NaN());
        const at::Tensor out = norm_relu(xs, at::ones({20}), at::zeros({20}), true);
        EXPECT_TRUE(std::isnan(out.index({0, 17, 1, 0}).item<float>())) << dtype;
        EXPECT_TRUE(std::isnan(out.index({0, 3, 0, 1}).item<float>())) << dtype;
        EXPECT_EQ(at::isnan(out).sum().item<int64_t>(), 2) << dtype;
    }
}

TEST(NormRelu, OtherInputsRunTheAtenDefinition) {
    at::manual_seed(7);
    auto check = [](const std::vector<at::Tensor> &xs, const at::Tensor &scale, const at::Tensor &shift,
                    const std::string &what) {
        EXPECT_FALSE(norm_relu_uses_own_kernel(xs, scale, shift)) << what;
        for (const bool relu : {true, false}) {
            const at::Tensor got = norm_relu(xs, scale, shift, relu);
            const at::Tensor want = reference(xs, scale, shift, relu);
            ASSERT_EQ(got.sizes(), want.sizes()) << what;
            EXPECT_EQ(got.scalar_type(), at::cat(xs, 1).scalar_type()) << what;
            const double rtol = got.scalar_type() == at::kBFloat16 ? 1.0 / 256 : 1e-6;
            EXPECT_TRUE(((got.to(at::kDouble) - want).abs() <= want.abs() * rtol + 1e-6).all().item<bool>()) << what;
        }
    };
    const at::Tensor s12 = at::randn({12}), t12 = at::randn({12});
    check(make_inputs({6, 6}, 2, 5, 5, at::kFloat, false), s12, t12, "NCHW");
    check({at::randn({2, 6, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast),
           at::randn({2, 6, 5, 5}).to(at::kBFloat16).contiguous(at::MemoryFormat::ChannelsLast)},
          s12, t12, "mixed dtypes");
    check(make_inputs({6, 6}, 2, 5, 5, at::kDouble, true), s12.to(at::kDouble), t12.to(at::kDouble), "fp64");
    check({at::randn({3, 12, 5})}, s12, t12, "3-D");
    check({at::randn({3, 12})}, s12, t12, "2-D");
    check(make_inputs({6, 6}, 2, 5, 5, at::kFloat, true), s12.to(at::kDouble), t12.to(at::kDouble), "fp64 scale");
    const at::Tensor cl = at::randn({2, 12, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast);
    check({cl.slice(1, 0, 6), cl.slice(1, 6, 12)}, s12, t12, "views of some channels");
    // errors: the channels do not match the scale, images of different sizes, a 1-D input
    EXPECT_THROW(norm_relu(make_inputs({6, 5}, 2, 5, 5, at::kFloat, true), s12, t12, true), c10::Error);
    EXPECT_THROW(norm_relu({at::randn({2, 6, 5, 5}), at::randn({2, 6, 4, 5})}, s12, t12, true), c10::Error);
    EXPECT_THROW(norm_relu({at::randn({12})}, s12, t12, true), c10::Error);
}

}  // namespace
}  // namespace ipex::ops
