// The own int8 stem kernel (ops/int8/int8_stem.h) against a naive reference of the quantized
// convolution (exact int64 sums, the epilogue in double, rounding half to even, saturation)
// over input channels 1-4, kernels 1x1 to 11x11, strides, asymmetric padding, output-channel
// tails, u8 / s8 inputs and outputs with zero points, relu and bias; and Int8Context's choice
// of it (IPEX_CONV_KERNELS) against its oneDNN convolution.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "ops/int8/int8_context.h"
#include "ops/int8/int8_stem.h"
#include "own_kernel_checks.h"

namespace ipex::quant {
namespace {

struct Case {
    int64_t n, c, h, w, oc, kh, kw, sh, sw, ph, pw;
    bool in_s8 = false, out_s8 = false, relu = true, bias = true;
    int64_t in_zp = 0, out_zp = 0;
    double gain = 1.0;  // on every scale: 1e9 puts outputs far past 2^31 before the narrowing
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p) { return (in + 2 * p - k) / s + 1; }

// src bytes: n x h x w x c (u8, or s8 stored as its two's complement byte).
at::Tensor reference(const Case &k, const at::Tensor &src, const at::Tensor &weight, const at::Tensor &bias,
                     const std::vector<float> &scales) {
    const int64_t oh = out_size(k.h, k.kh, k.sh, k.ph), ow = out_size(k.w, k.kw, k.sw, k.pw);
    at::Tensor out = at::empty({k.n, oh, ow, k.oc}, at::kLong);
    const auto x = src.accessor<uint8_t, 4>();
    const auto wt = weight.accessor<int8_t, 4>();
    auto o = out.accessor<int64_t, 4>();
    std::vector<double> b(k.oc, 0.0);
    for (int64_t q = 0; bias.defined() && q < k.oc; ++q) b[q] = bias[q].item<double>();
    const auto value = [&](uint8_t v) { return k.in_s8 ? static_cast<int64_t>(static_cast<int8_t>(v)) : v; };
    for (int64_t i = 0; i < k.n; ++i)
        for (int64_t y = 0; y < oh; ++y)
            for (int64_t xo = 0; xo < ow; ++xo)
                for (int64_t q = 0; q < k.oc; ++q) {
                    int64_t acc = 0;
                    for (int64_t r = 0; r < k.kh; ++r)
                        for (int64_t s = 0; s < k.kw; ++s) {
                            const int64_t iy = y * k.sh - k.ph + r, ix = xo * k.sw - k.pw + s;
                            if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;  // the zero point: 0
                            for (int64_t c = 0; c < k.c; ++c)
                                acc += (value(x[i][iy][ix][c]) - k.in_zp) * wt[q][c][r][s];
                        }
                    double v = (acc + b[q]) * scales[q];
                    if (k.relu) v = std::max(v, 0.0);
                    const double lo = k.out_s8 ? -128 : 0, hi = k.out_s8 ? 127 : 255;
                    o[i][y][xo][q] = static_cast<int64_t>(std::clamp(std::nearbyint(v + k.out_zp), lo, hi));
                }
    return out;
}

void check(const Case &k, uint64_t seed) {
    SCOPED_TRACE(::testing::Message() << "n" << k.n << " c" << k.c << " " << k.h << "x" << k.w << " oc" << k.oc
                                      << " k" << k.kh << "x" << k.kw << " s" << k.sh << "," << k.sw << " p" << k.ph
                                      << "," << k.pw << (k.in_s8 ? " s8" : " u8") << "->" << (k.out_s8 ? "s8" : "u8")
                                      << " zp " << k.in_zp << "/" << k.out_zp << (k.relu ? " relu" : "")
                                      << (k.bias ? " bias" : ""));
    at::manual_seed(seed);
    const at::Tensor src = at::randint(0, 256, {k.n, k.h, k.w, k.c}, at::kByte);
    const at::Tensor weight = at::randint(-127, 128, {k.oc, k.c, k.kh, k.kw}, at::kChar);
    const at::Tensor bias = k.bias ? at::randn({k.oc}) * 2000 : at::Tensor();
    // Scales that put the outputs across the output range, some channels saturating.
    std::vector<float> scales(k.oc);
    const double spread = 128.0 * 128.0 * std::sqrt(static_cast<double>(k.c * k.kh * k.kw));
    for (int64_t q = 0; q < k.oc; ++q) scales[q] = static_cast<float>(k.gain * (40.0 + 13 * (q % 7)) / spread);
    const stem::Plan plan = stem::make_plan(weight, bias, scales, {k.sh, k.sw}, {k.ph, k.pw}, k.relu, k.in_s8,
                                            k.in_zp, k.out_s8, k.out_zp);
    EXPECT_EQ(plan.epilogue.in_int32, k.gain < 1e3);  // the packs' narrowing only where y stays below 2^31
    const int64_t oh = out_size(k.h, k.kh, k.sh, k.ph), ow = out_size(k.w, k.kw, k.sw, k.pw);
    // One guard byte past the output: the kernel writes no byte outside it.
    at::Tensor dst = at::full({k.n * oh * ow * k.oc + 64}, 0x5a, at::kByte);
    stem::run(plan, src.data_ptr<uint8_t>(), k.n, k.h, k.w, dst.data_ptr<uint8_t>(), oh, ow);
    const at::Tensor got = dst.narrow(0, 0, k.n * oh * ow * k.oc).reshape({k.n, oh, ow, k.oc});
    const at::Tensor got_values = k.out_s8 ? got.view(at::kChar).to(at::kLong) : got.to(at::kLong);
    const at::Tensor want = reference(k, src, weight, bias, scales);
    expect_within_one_step(got_values, want, dst.narrow(0, k.n * oh * ow * k.oc, 64));
}

class Int8Stem : public ::testing::Test {
protected:
    void SetUp() override {
        if (!stem::available()) GTEST_SKIP() << "this CPU has no AVX512-VNNI: the stem kernel does not run";
    }
};

TEST_F(Int8Stem, ResNetStemShape) {
    check({2, 3, 37, 45, 64, 7, 7, 2, 2, 3, 3}, 1);
    check({1, 3, 64, 64, 64, 7, 7, 2, 2, 3, 3, false, false, true, true, 128, 0}, 2);
}

TEST_F(Int8Stem, ChannelsKernelsStridesPadding) {
    uint64_t seed = 10;
    for (int64_t c : {1, 2, 3, 4})
        for (auto [kh, kw] : {std::pair<int64_t, int64_t>{1, 1}, {3, 3}, {5, 5}, {3, 5}, {7, 2}, {11, 11}})
            for (auto [sh, sw] : {std::pair<int64_t, int64_t>{1, 1}, {2, 2}, {3, 1}, {4, 4}}) {
                const int64_t ph = (kh - 1) / 2, pw = kw / 2;
                if (kw * c > 64) continue;
                check({2, c, 9 + kh, 11 + kw, 24, kh, kw, sh, sw, ph, pw, false, false, true, true, 3, 0}, seed++);
            }
    check({1, 4, 20, 20, 32, 3, 16, 1, 1, 1, 0}, seed++);  // kw x c = 64: the widest row
    check({1, 3, 9, 9, 16, 3, 3, 1, 1, 0, 0}, seed++);      // no padding
    check({1, 3, 9, 9, 16, 3, 3, 1, 1, 4, 2}, seed++);      // padding past the kernel's reach
}

TEST_F(Int8Stem, OutputChannelTailsAndNarrowRows) {
    uint64_t seed = 100;
    for (int64_t oc : {1, 15, 16, 17, 33, 48, 63, 64, 65, 100, 130, 192})
        check({1, 3, 11, 23, oc, 3, 3, 2, 2, 1, 1, false, false, true, true, 7, 0}, seed++);
    for (int64_t w : {1, 2, 5, 6, 7, 12, 13, 25})  // rows of fewer, exactly, and more pixels than a tile
        check({2, 3, 6, w, 64, 3, 3, 1, 1, 1, 1}, seed++);
}

TEST_F(Int8Stem, SignedTypesZeroPointsRelu) {
    uint64_t seed = 200;
    for (bool in_s8 : {false, true})
        for (bool out_s8 : {false, true})
            for (bool relu : {false, true})
                for (bool bias : {false, true})
                    for (int64_t oc : {40, 64}) {  // a tail tile; whole 64-channel tiles (their own epilogue)
                        const int64_t in_zp = in_s8 ? -5 : 131, out_zp = out_s8 ? (relu ? -20 : 3) : (relu ? 12 : 100);
                        check({2, 3, 19, 41, oc, 5, 5, 2, 2, 2, 2, in_s8, out_s8, relu, bias, in_zp, out_zp}, seed++);
                    }
}

// Scales so large that y passes 2^31 (where the int32 conversion overflows): every output still
// saturates to the type's top or bottom, on whole 64-channel tiles and on a tail.
TEST_F(Int8Stem, OutputsPast2To31Saturate) {
    uint64_t seed = 300;
    for (bool out_s8 : {false, true})
        for (int64_t oc : {40, 64}) {
            Case k{2, 3, 19, 41, oc, 5, 5, 2, 2, 2, 2, false, out_s8, false, true, 131, out_s8 ? 3 : 100};
            k.gain = 1e9;
            check(k, seed++);
        }
}

// The rows' last groups merged where they hold 1 or 2 taps: the groups a pixel's window makes.
TEST(Int8StemPlan, MergesRowTailsOfOneOrTwoTaps) {
    const auto groups = [](int64_t c, int64_t kh, int64_t kw) {
        const at::Tensor weight = at::ones({16, c, kh, kw}, at::kChar);
        const stem::Plan p = stem::make_plan(weight, at::Tensor(), std::vector<float>(16, 0.01f), {2, 2},
                                             {kh / 2, kw / 2}, true, false, 0, false, 0);
        EXPECT_EQ(p.packed.numel(), p.groups() * 64 * 4);
        return std::vector<int64_t>{p.row_groups, p.tail_bytes, p.rows_per_tail, p.tail_groups};
    };
    EXPECT_EQ(groups(3, 7, 7), (std::vector<int64_t>{5, 1, 4, 2}));  // 21 bytes a row: 37 groups, not 42
    EXPECT_EQ(groups(3, 3, 3), (std::vector<int64_t>{2, 1, 4, 1}));  // 9 bytes a row: 7 groups, not 9
    EXPECT_EQ(groups(2, 7, 3), (std::vector<int64_t>{1, 2, 2, 4}));  // 6 bytes a row: two rows' tails a group
    EXPECT_EQ(groups(3, 5, 5), (std::vector<int64_t>{4, 0, 1, 0}));  // 15 bytes: 3 taps in the last group
    EXPECT_EQ(groups(4, 3, 3), (std::vector<int64_t>{3, 0, 1, 0}));  // whole groups
    EXPECT_EQ(groups(3, 1, 7), (std::vector<int64_t>{6, 0, 1, 0}));  // one row: nothing to merge with
}

TEST(Int8StemFits, WhatTheKernelTakes) {
    EXPECT_TRUE(stem::fits(3, 7, 7, 1, {1, 1}));
    EXPECT_TRUE(stem::fits(4, 3, 16, 1, {1, 1}));
    EXPECT_FALSE(stem::fits(5, 3, 3, 1, {1, 1}));   // more than 4 channels: oneDNN's own kernels fit
    EXPECT_FALSE(stem::fits(4, 3, 17, 1, {1, 1}));  // a kernel row of 68 bytes
    EXPECT_FALSE(stem::fits(3, 3, 3, 3, {1, 1}));   // groups
    EXPECT_FALSE(stem::fits(3, 3, 3, 1, {2, 1}));   // dilation
    EXPECT_FALSE(stem::fits(3, 3, 3, 1, {1}));      // not 2-D
}

c10::intrusive_ptr<Int8Context> stem_context(at::ScalarType in, at::ScalarType out, bool sum = false) {
    at::manual_seed(7);
    Int8Params p;
    p.kind = "conv2d";
    p.stride = {2, 2};
    p.padding = {3, 3};
    p.dilation = {1, 1};
    p.in_scale = 0.02;
    p.in_zero_point = in == at::kQInt8 ? 3 : 120;
    p.out_scale = 0.05;
    p.out_zero_point = out == at::kQInt8 ? -10 : 0;
    p.in_dtype = in;
    p.out_dtype = out;
    p.relu = true;
    p.sum = sum;
    p.other_dtype = at::kQUInt8;
    const at::Tensor w = at::randn({64, 3, 7, 7}) * 0.1;
    std::vector<double> scales(64);
    for (int64_t q = 0; q < 64; ++q) scales[q] = w[q].abs().max().item<double>() / 127.0;
    return c10::make_intrusive<Int8Context>(w, at::randn({64}) * 0.1, scales, p);
}

TEST_F(Int8Stem, ContextRunsItAsTheVariableSays) {
    for (at::ScalarType in : {at::kQUInt8, at::kQInt8})
        for (at::ScalarType out : {at::kQUInt8, at::kQInt8}) {
            c10::intrusive_ptr<Int8Context> own, onednn, timed;
            {
                KernelsVariable v("1");
                own = stem_context(in, out);
            }
            {
                KernelsVariable v("0");
                onednn = stem_context(in, out);
            }
            timed = stem_context(in, out);
            EXPECT_TRUE(own->own_kernel() == std::string("stem"));
            EXPECT_FALSE(onednn->own_kernel() == std::string("stem"));
            EXPECT_TRUE(timed->own_kernel() == std::string("stem"));
            const at::Tensor x = at::randn({3, 3, 30, 34}) * 2;
            const int64_t zp = in == at::kQInt8 ? 3 : 120;
            // NCHW input: the context makes it channels-last, then runs either kernel.
            const at::Tensor qx = at::quantize_per_tensor(x, 0.02, zp, in);
            const at::Tensor a = own->run(qx, c10::nullopt), b = onednn->run(qx, c10::nullopt);
            const at::Tensor c = timed->run(qx, c10::nullopt);
            EXPECT_TRUE(own->own_kernel_for(qx.sizes()));
            EXPECT_FALSE(onednn->own_kernel_for(qx.sizes()));
            EXPECT_EQ(a.sizes(), b.sizes());
            EXPECT_EQ(a.scalar_type(), out);
            EXPECT_TRUE(a.is_contiguous(at::MemoryFormat::ChannelsLast));
            EXPECT_DOUBLE_EQ(a.q_scale(), 0.05);
            EXPECT_EQ(a.q_zero_point(), out == at::kQInt8 ? -10 : 0);
            const at::Tensor ia = a.int_repr().to(at::kInt), ib = b.int_repr().to(at::kInt);
            EXPECT_LE((ia - ib).abs().max().item<int>(), 1);
            EXPECT_GT(ib.to(at::kFloat).std().item<float>(), 1.0f);  // not a constant output
            EXPECT_LE((c.int_repr().to(at::kInt) - ib).abs().max().item<int>(), 1);
        }
}

TEST_F(Int8Stem, NotForSumsNorWideInputs) {
    KernelsVariable v("1");
    EXPECT_FALSE(stem_context(at::kQUInt8, at::kQUInt8, /*sum=*/true)->own_kernel() == std::string("stem"));
    Int8Params p;
    p.kind = "conv2d";
    p.stride = {1, 1};
    p.padding = {1, 1};
    p.dilation = {1, 1};
    const at::Tensor w = at::randn({16, 8, 3, 3});
    EXPECT_FALSE(Int8Context(w, c10::nullopt, std::vector<double>(16, 0.01), p).own_kernel() == std::string("stem"));
}

}  // namespace
}  // namespace ipex::quant
