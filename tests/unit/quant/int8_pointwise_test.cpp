// The own int8 pointwise kernel (ops/int8/int8_pointwise.h) against a naive reference of the
// quantized 1x1 convolution (exact int64 sums, the epilogue in double as oneDNN orders it:
// scale, relu, the residual sum, relu, the output zero point, rounding half to even,
// saturation) over input channels 4-260, output channels 64-192, strides 1-3, pixel counts that
// end inside a tile and chunks that cross rows and images, u8 / s8 summands and outputs with
// zero points; and Int8Context's choice of it (IPEX_CONV_KERNELS) against oneDNN, the sum in
// place included.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ops/int8/int8_context.h"
#include "ops/int8/int8_pointwise.h"
#include "ops/int8/int8_stem.h"
#include "own_kernel_checks.h"

namespace ipex::quant {
namespace {

struct Case {
    int64_t images, h, w, k, n, stride;
    vnni::Epilogue e;
    int64_t in_zp = 0, sum_zp = 0;
    bool bias = true;
    bool in_s8 = false;
    double gain = 1.0;  // on every scale: 1e9 puts outputs far past 2^31 before the narrowing
};

vnni::Epilogue epilogue(bool relu, bool sum, bool sum_s8, bool sum_relu, bool out_s8, float out_zp) {
    vnni::Epilogue e;
    e.relu = relu;
    e.sum = sum;
    e.sum_s8 = sum_s8;
    e.sum_relu = sum_relu;
    e.out_s8 = out_s8;
    e.sum_scale = 0.75f;
    e.out_zero_point = out_zp;
    return e;
}

void check(Case c, uint64_t seed) {
    const vnni::Epilogue &e = c.e;
    SCOPED_TRACE(::testing::Message() << c.images << "x" << c.h << "x" << c.w << " k" << c.k << " n" << c.n << " s"
                                      << c.stride << (e.relu ? " relu" : "") << (e.sum ? " sum" : "")
                                      << (e.sum_s8 ? " s8" : "") << (e.sum_relu ? " relu" : "")
                                      << (e.out_s8 ? " ->s8" : " ->u8") << " zp " << e.out_zero_point << " in zp "
                                      << c.in_zp << (c.in_s8 ? " s8 input" : ""));
    at::manual_seed(seed);
    c.e.sum_shift = -c.e.sum_scale * static_cast<float>(c.sum_zp);
    const int64_t oh = (c.h - 1) / c.stride + 1, ow = (c.w - 1) / c.stride + 1, m = c.images * oh * ow;
    const at::Tensor src = at::randint(0, 256, {c.images, c.h, c.w, c.k}, at::kByte);
    const at::Tensor weight = at::randint(-127, 128, {c.n, c.k, 1, 1}, at::kChar);
    const at::Tensor bias = c.bias ? at::randn({c.n}) * 3000 : at::Tensor();
    const at::Tensor summand = at::randint(0, 256, {m, c.n}, at::kByte);
    std::vector<float> scales(c.n);
    const double spread = 128.0 * 128.0 * std::sqrt(static_cast<double>(c.k));
    for (int64_t q = 0; q < c.n; ++q) scales[q] = static_cast<float>(c.gain * (30.0 + 11 * (q % 5)) / spread);
    const pointwise::Plan plan =
        pointwise::make_plan(weight, bias, scales, {c.stride, c.stride}, c.in_s8, c.in_zp, c.e);
    EXPECT_EQ(plan.folded.in_int32, c.gain < 1e3);  // the packs' narrowing only where y stays below 2^31

    at::Tensor dst = at::full({m * c.n + 64}, 0x5a, at::kByte);  // guard bytes past the output
    dst.narrow(0, 0, m * c.n).copy_(summand.reshape(-1));
    pointwise::run(plan, src.data_ptr<uint8_t>(), c.images, c.h, c.w, dst.data_ptr<uint8_t>());

    // The reference: the input at (image, y x stride, x x stride) for each output pixel.
    const at::Tensor x = src.index({at::indexing::Slice(), at::indexing::Slice(0, c.h, c.stride),
                                    at::indexing::Slice(0, c.w, c.stride)})
                             .reshape({m, c.k});
    const at::Tensor x_values = (c.in_s8 ? x.view(at::kChar) : x).to(at::kLong) - c.in_zp;
    const at::Tensor acc = at::matmul(x_values, weight.reshape({c.n, c.k}).to(at::kLong).t()).to(at::kDouble);
    at::Tensor y = (acc + (c.bias ? bias.to(at::kDouble) : at::zeros({c.n}, at::kDouble))) *
                   at::tensor(std::vector<double>(scales.begin(), scales.end()), at::kDouble);
    if (e.relu) y = y.clamp_min(0);
    if (e.sum) {
        const at::Tensor r = e.sum_s8 ? summand.view(at::kChar).to(at::kDouble) : summand.to(at::kDouble);
        y = y + static_cast<double>(e.sum_scale) * (r - c.sum_zp);
        if (e.sum_relu) y = y.clamp_min(0);
    }
    const double lo = e.out_s8 ? -128 : 0, hi = e.out_s8 ? 127 : 255;
    const at::Tensor want = (y + e.out_zero_point).round().clamp(lo, hi).to(at::kLong);  // round: half to even
    const at::Tensor got_bytes = dst.narrow(0, 0, m * c.n).reshape({m, c.n});
    const at::Tensor got = e.out_s8 ? got_bytes.view(at::kChar).to(at::kLong) : got_bytes.to(at::kLong);
    expect_within_one_step(got, want, dst.narrow(0, m * c.n, 64));
}

class Int8Pointwise : public ::testing::Test {
protected:
    void SetUp() override {
        if (!stem::available()) GTEST_SKIP() << "this CPU has no AVX512-VNNI: the pointwise kernel does not run";
    }
};

TEST_F(Int8Pointwise, ResNetShapes) {
    check({2, 14, 14, 64, 256, 1, epilogue(false, true, false, true, false, 0)}, 1);    // widening + sum
    check({2, 14, 14, 256, 64, 1, epilogue(true, false, false, false, false, 0)}, 2);   // narrowing + relu
    check({2, 14, 14, 256, 512, 2, epilogue(false, true, false, true, false, 0)}, 3);   // downsample + sum
    Case s8{2, 14, 14, 64, 256, 1, epilogue(false, true, true, true, true, 0)};         // s8 throughout
    s8.in_s8 = true;
    check(s8, 4);
}

TEST_F(Int8Pointwise, ChannelsStridesAndPixelTails) {
    uint64_t seed = 10;
    for (int64_t k : {4, 8, 100, 128, 260})
        for (int64_t n : {64, 192})
            for (int64_t stride : {1, 2, 3})
                for (auto [h, w] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {9, 13}}) {
                    check({3, h, w, k, n, stride, epilogue(true, false, false, false, false, 0), 5}, seed++);
                }
    // Chunks of 48 pixels crossing rows and images; one pixel past a whole tile.
    check({3, 11, 11, 64, 128, 1, epilogue(false, true, false, true, false, 0)}, seed++);
    check({1, 1, 49, 32, 64, 1, epilogue(false, false, false, false, false, 17)}, seed++);
}

TEST_F(Int8Pointwise, EpiloguesTypesAndZeroPoints) {
    uint64_t seed = 100;
    for (bool relu : {false, true})
        for (bool sum : {false, true})
            for (bool sum_s8 : {false, true})
                for (bool sum_relu : {false, true})
                    for (bool out_s8 : {false, true}) {
                        if (!sum && (sum_s8 || sum_relu)) continue;
                        const float out_zp = out_s8 ? -7.f : 60.f;
                        Case c{2, 6, 5, 32, 64, 1, epilogue(relu, sum, sum_s8, sum_relu, out_s8, out_zp)};
                        c.in_zp = 9;
                        c.sum_zp = sum_s8 ? -3 : 131;
                        c.bias = (seed % 2) == 0;
                        c.in_s8 = (seed % 3) == 0;
                        if (c.in_s8) c.in_zp = -4;
                        check(c, seed++);
                    }
}

// Scales so large that y passes 2^31 (where the int32 conversion overflows): every output still
// saturates to the type's top or bottom, with and without a sum, u8 and s8.
TEST_F(Int8Pointwise, OutputsPast2To31Saturate) {
    uint64_t seed = 300;
    for (bool sum : {false, true})
        for (bool out_s8 : {false, true}) {
            Case c{2, 5, 7, 64, 128, 1, epilogue(false, sum, false, sum, out_s8, out_s8 ? 3.f : 100.f)};
            c.gain = 1e9;
            check(c, seed++);
        }
}

TEST(Int8PointwiseFits, WhatTheKernelTakes) {
    const std::vector<int64_t> one{1, 1}, zero{0, 0}, two{2, 2};
    EXPECT_TRUE(pointwise::fits(64, 256, one, one, zero, one, 1));
    EXPECT_TRUE(pointwise::fits(256, 512, one, two, zero, one, 1));
    EXPECT_FALSE(pointwise::fits(66, 256, one, one, zero, one, 1));  // k not a multiple of 4
    EXPECT_FALSE(pointwise::fits(64, 96, one, one, zero, one, 1));   // n not a multiple of 64
    EXPECT_FALSE(pointwise::fits(64, 256, std::vector<int64_t>{3, 3}, one, zero, one, 1));
    EXPECT_FALSE(pointwise::fits(64, 256, one, one, std::vector<int64_t>{1, 1}, one, 1));  // padding
    EXPECT_FALSE(pointwise::fits(64, 256, one, one, zero, two, 1));                        // dilation
    EXPECT_FALSE(pointwise::fits(64, 256, one, one, zero, one, 2));                        // groups
}

c10::intrusive_ptr<Int8Context> sum_context(int64_t stride) {
    at::manual_seed(3);
    Int8Params p;
    p.kind = "conv2d";
    p.stride = {stride, stride};
    p.padding = {0, 0};
    p.dilation = {1, 1};
    p.in_scale = 0.03;
    p.out_scale = 0.05;
    p.sum = true;
    p.other_scale = 0.04;
    p.other_zero_point = 5;
    p.sum_relu = true;
    p.sum_in_place = true;
    const at::Tensor w = at::randn({128, 64, 1, 1}) * 0.1;
    std::vector<double> scales(128);
    for (int64_t q = 0; q < 128; ++q) scales[q] = w[q].abs().max().item<double>() / 127.0;
    return c10::make_intrusive<Int8Context>(w, at::randn({128}) * 0.1, scales, p);
}

TEST_F(Int8Pointwise, ContextRunsItWithItsSum) {
    for (int64_t stride : {1, 2}) {
        c10::intrusive_ptr<Int8Context> own, onednn;
        {
            KernelsVariable v("1");
            own = sum_context(stride);
        }
        {
            KernelsVariable v("0");
            onednn = sum_context(stride);
        }
        EXPECT_EQ(std::string(own->own_kernel()), "pointwise");
        EXPECT_EQ(std::string(onednn->own_kernel()), "");
        const at::Tensor qx = at::quantize_per_tensor(at::rand({2, 64, 9, 11}) * 3, 0.03, 0, at::kQUInt8)
                                  .contiguous(at::MemoryFormat::ChannelsLast);
        const int64_t oh = (9 - 1) / stride + 1, ow = (11 - 1) / stride + 1;
        const at::Tensor other = at::quantize_per_tensor(at::randn({2, 128, oh, ow}), 0.04, 5, at::kQUInt8)
                                     .contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor kept = other.int_repr().clone();
        // A copy each: the sum in place writes over its summand.
        const at::Tensor a = own->run(qx, other.clone()), b = onednn->run(qx, other.clone());
        EXPECT_TRUE(own->own_kernel_for(qx.sizes()));
        EXPECT_TRUE(other.int_repr().equal(kept)) << "the caller's summand changed";
        const at::Tensor ia = a.int_repr().to(at::kInt), ib = b.int_repr().to(at::kInt);
        EXPECT_LE((ia - ib).abs().max().item<int>(), 1);
        EXPECT_GT(ib.to(at::kFloat).std().item<float>(), 1.0f);
        // Timed (unset): the first call times both into a scratch copy, the summand kept for the result.
        const at::Tensor c = sum_context(stride)->run(qx, other.clone());
        EXPECT_LE((c.int_repr().to(at::kInt) - ib).abs().max().item<int>(), 1);
    }
}

}  // namespace
}  // namespace ipex::quant
