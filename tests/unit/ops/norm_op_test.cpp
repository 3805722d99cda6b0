// ipex::norm_relu against an fp64 reference (cat along dim 1, times scale plus shift, ReLU)
// over one and several inputs with odd channel counts (vector tails), batch 1 and more, small
// and large images, with and without the ReLU, fp32 and bf16 channels-last inputs; against
// aten's batch_norm + relu too; NaN stays NaN through the ReLU; what the kernel does not take
// (NCHW, mixed dtypes, fp64, other ranks) runs the aten definition, errors included. The
// portable kernel (CPUs without AVX-512) the same way, called directly.
// ipex::scale_mul against aten::mul (below).
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

struct Case {
    std::vector<int64_t> channels;
    int64_t n, h, w;
};
const std::vector<Case> &cases() {
    static const std::vector<Case> list = {
        {{1}, 1, 1, 1},          {{3}, 2, 5, 7},           {{16}, 1, 4, 4},        {{17, 16, 3}, 2, 3, 5},
        {{64, 32, 32}, 4, 7, 7}, {{130}, 1, 11, 13},       {{32, 32, 32, 32, 32}, 2, 14, 14},
        {{24}, 3, 57, 33},       {{7, 1, 33}, 1, 1, 40},   {{256, 32}, 1, 2, 3}};
    return list;
}

// The portable kernel called directly (norm_relu takes the AVX-512 one where the CPU has it).
at::Tensor portable(const std::vector<at::Tensor> &xs, const at::Tensor &scale, const at::Tensor &shift, bool relu) {
    return norm_relu_own_kernel(xs, scale, shift, relu, true);
}

using Kernel = at::Tensor (*)(const std::vector<at::Tensor> &, const at::Tensor &, const at::Tensor &, bool);

void expect_reference_numbers(Kernel kernel) {
    at::manual_seed(5);
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const auto &c : cases()) {
            const auto xs = make_inputs(c.channels, c.n, c.h, c.w, dtype, true);
            const at::Tensor scale = at::randn({total(c.channels)}), shift = at::randn({total(c.channels)});
            for (const bool relu : {true, false}) {
                std::ostringstream what;
                what << at::IntArrayRef(c.channels) << " n" << c.n << " " << c.h << "x" << c.w << " " << dtype
                     << (relu ? " relu" : "");
                EXPECT_TRUE(norm_relu_uses_own_kernel(xs, scale, shift)) << what.str();
                const at::Tensor got = kernel(xs, scale, shift, relu);
                const at::Tensor want = reference(xs, scale, shift, relu);
                ASSERT_EQ(got.sizes(), want.sizes()) << what.str();
                ASSERT_EQ(got.scalar_type(), dtype) << what.str();
                EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what.str();
                // fp32: one fused multiply-add; bf16: one rounding (2^-9 relative) of that
                const double rtol = dtype == at::kFloat ? 1e-6 : 1.0 / 256;
                const at::Tensor err = (got.to(at::kDouble) - want).abs();
                const at::Tensor bound = want.abs() * rtol + 1e-6;
                EXPECT_TRUE((err <= bound).all().item<bool>())
                    << what.str() << ": max error " << err.max().item<double>();
                if (relu) EXPECT_GE(got.min().item<double>(), 0.0) << what.str();
            }
        }
    }
}

// Channels-last fp32 and bf16 inputs of one size take an own kernel on every CPU: AVX-512 where
// the CPU has it, else the portable one.
TEST(NormRelu, MatchesTheFp64Reference) {
    expect_reference_numbers([](const std::vector<at::Tensor> &xs, const at::Tensor &scale, const at::Tensor &shift,
                                bool relu) { return norm_relu(xs, scale, shift, relu); });
}

TEST(NormRelu, PortableKernelMatchesTheFp64Reference) { expect_reference_numbers(&portable); }

TEST(NormRelu, PortableKernelKeepsNan) {
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        auto xs = make_inputs({20, 3}, 1, 2, 2, dtype, true);
        xs[0].index_put_({0, 17, 1, 0}, std::numeric_limits<float>::quiet_NaN());
        xs[1].index_put_({0, 2, 0, 1}, std::numeric_limits<float>::quiet_NaN());
        const at::Tensor out = portable(xs, at::ones({23}), at::zeros({23}), true);
        EXPECT_TRUE(std::isnan(out.index({0, 17, 1, 0}).item<float>())) << dtype;
        EXPECT_TRUE(std::isnan(out.index({0, 22, 0, 1}).item<float>())) << dtype;
        EXPECT_EQ(at::isnan(out).sum().item<int64_t>(), 2) << dtype;
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

// ipex::scale_mul: aten::mul's numbers, bit for bit (one fp32 product, one rounding), over
// odd channel counts (vector tails), batch 1 and more, per-image and shared scales, either
// operand order; the input's storage reused only when the call holds the only reference.
TEST(ScaleMul, MatchesAtenMul) {
    at::manual_seed(5);
    const std::vector<std::vector<int64_t>> shapes = {{1, 1, 1, 1}, {2, 3, 5, 7},   {8, 144, 14, 14},
                                                      {1, 17, 9, 4}, {3, 40, 1, 6}, {2, 1152, 7, 7}};
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const bool own = dtype == at::kBFloat16 && own_kernels::available(true);  // fp32: aten's multiply
        for (const auto &shape : shapes) {
            const int64_t n = shape[0], c = shape[1];
            const at::Tensor x = (at::randn(shape) * 3).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
            for (const auto &scale_shape : std::vector<std::vector<int64_t>>{{n, c, 1, 1}, {1, c, 1, 1}, {c, 1, 1}}) {
                const at::Tensor s = at::sigmoid(at::randn(scale_shape)).to(dtype);
                for (const bool x_first : {true, false}) {
                    std::ostringstream what;
                    what << x.sizes() << " " << dtype << " scale " << s.sizes() << (x_first ? " x * s" : " s * x");
                    const at::Tensor a = x_first ? x : s, b = x_first ? s : x;
                    EXPECT_EQ(scale_mul_uses_own_kernel(a, b), own) << what.str();
                    const at::Tensor want = at::mul(a, b);
                    const at::Tensor before = x.clone();
                    const at::Tensor got = scale_mul(a, b);
                    ASSERT_EQ(got.sizes(), want.sizes()) << what.str();
                    ASSERT_EQ(got.scalar_type(), dtype) << what.str();
                    EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what.str();
                    EXPECT_TRUE(at::equal(got, want)) << what.str() << ": max difference "
                                                      << (got.to(at::kDouble) - want.to(at::kDouble)).abs().max();
                    // the caller still holds x: its values stay
                    EXPECT_TRUE(at::equal(x, before)) << what.str();
                    EXPECT_NE(got.data_ptr(), x.data_ptr()) << what.str();
                }
            }
        }
    }
}

TEST(ScaleMul, WritesIntoTheInputOnlyWhenNothingElseHoldsIt) {
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor s = at::rand({2, 20, 1, 1}).to(dtype);
        const auto make = [&] { return at::randn({2, 20, 6, 5}).to(dtype).contiguous(at::MemoryFormat::ChannelsLast); };
        // handed over: the result lives in the input's storage
        at::Tensor x = make();
        const at::Tensor want = at::mul(x, s);
        void *storage = x.data_ptr();
        at::Tensor got = scale_mul(std::move(x), s);
        EXPECT_EQ(got.data_ptr(), storage) << dtype;
        EXPECT_TRUE(at::equal(got, want)) << dtype;
        // the same with the operands swapped
        at::Tensor y = make();
        const at::Tensor want_y = at::mul(s, y);
        storage = y.data_ptr();
        got = scale_mul(s, std::move(y));
        EXPECT_EQ(got.data_ptr(), storage) << dtype;
        EXPECT_TRUE(at::equal(got, want_y)) << dtype;
        // a view of it held elsewhere: a new tensor, the view's values unchanged
        at::Tensor z = make();
        const at::Tensor view = z.permute({0, 2, 3, 1}).view({-1});
        const at::Tensor view_before = view.clone();
        got = scale_mul(std::move(z), s);
        EXPECT_NE(got.data_ptr(), view.data_ptr()) << dtype;
        EXPECT_TRUE(at::equal(view, view_before)) << dtype;
        EXPECT_TRUE(at::equal(got, at::mul(view.view({2, 6, 5, 20}).permute({0, 3, 1, 2}), s))) << dtype;
    }
}

TEST(ScaleMul, OtherInputsRunAtenMul) {
    const at::Tensor x = at::randn({2, 8, 5, 5});
    const at::Tensor cl = x.contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor s = at::rand({2, 8, 1, 1});
    const std::vector<std::pair<at::Tensor, at::Tensor>> cases = {
        {x, s},                                                    // NCHW
        {cl.to(at::kBFloat16), s},                                 // mixed dtypes: aten promotes
        {cl.to(at::kDouble), s.to(at::kDouble)},                   // fp64
        {cl, at::rand({2, 8, 5, 1})},                              // not one value per channel
        {cl, at::rand({5})},                                       // broadcast along the width
        {cl, cl},                                                  // elementwise
        {cl.slice(0, 0, 1), s},                                    // the scale has more images
        {at::randn({8, 5, 5}), at::rand({8, 1, 1})},               // 3-D
        {cl.slice(1, 0, 4), at::rand({2, 4, 1, 1})}};              // not dense
    for (const auto &[a, b] : cases) {
        EXPECT_FALSE(scale_mul_uses_own_kernel(a, b)) << a.sizes() << " * " << b.sizes();
        const at::Tensor got = scale_mul(a, b), want = at::mul(a, b);
        EXPECT_EQ(got.scalar_type(), want.scalar_type()) << a.sizes() << " * " << b.sizes();
        EXPECT_TRUE(at::equal(got, want)) << a.sizes() << " * " << b.sizes();
    }
    // shapes that do not broadcast: aten's error
    EXPECT_THROW(scale_mul(cl, at::rand({3, 8, 1, 1})), c10::Error);
    EXPECT_THROW(scale_mul(cl, at::rand({2, 7, 1, 1})), c10::Error);
}

}  // namespace
}  // namespace ipex::ops
