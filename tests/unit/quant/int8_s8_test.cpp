// ipex int8 ops with s8 (qint8) activations and mixed u8/s8 inputs, outputs and residual
// operands, against an fp64 reference of the quantized computation: the dequantized input
// and weight convolved in double, bias added, relu/sum applied, then requantized to the
// output type. oneDNN accumulates in int32 and rounds once, so results may differ from the
// reference by one step.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ops/int8/int8_context.h"
#include "quant/observers.h"

namespace ipex::quant {
namespace {

constexpr int64_t kMaxStepDiff = 1;
constexpr at::ScalarType U8 = at::kQUInt8;
constexpr at::ScalarType S8 = at::kQInt8;

struct Case {
    std::string kind;
    std::vector<int64_t> input, weight;
    at::ScalarType in = S8, out = S8, other = S8;
    int64_t in_zp = 0;
    bool relu = false, sum = false, sum_relu = false, in_place = false;
    int64_t groups = 1;
};

int64_t lo(at::ScalarType t) { return t == S8 ? -128 : 0; }
int64_t hi(at::ScalarType t) { return t == S8 ? 127 : 255; }

// Parameters covering [min, max] of `ref` on type `t`: s8 symmetric, u8 affine.
std::pair<double, int64_t> params_for(const at::Tensor &ref, at::ScalarType t) {
    const double mn = std::min(0.0, ref.min().item<double>()), mx = std::max(0.0, ref.max().item<double>());
    if (t == S8) return {std::max(std::abs(mn), mx) / 127.0, 0};
    const double scale = (mx - mn) / 255.0;
    return {scale, std::clamp<int64_t>(std::llround(-mn / scale), 0, 255)};
}

// Requantizes a double tensor the way the kernels do (round to nearest, saturate).
at::Tensor requantize(const at::Tensor &ref, double scale, int64_t zp, at::ScalarType t) {
    return (ref / scale).round().add(zp).clamp(lo(t), hi(t)).to(at::kLong);
}

at::Tensor reference(const Case &c, const at::Tensor &qx, const at::Tensor &w_deq, const at::Tensor &bias) {
    const at::Tensor x = qx.dequantize().to(at::kDouble);
    const at::Tensor w = w_deq.to(at::kDouble), b = bias.to(at::kDouble);
    const std::vector<int64_t> one(c.input.size() - 2, 1);
    if (c.kind == "linear") return at::linear(x, w, b);
    if (c.kind == "conv1d") return at::conv1d(x, w, b, one, one, one, c.groups);
    if (c.kind == "conv2d") return at::conv2d(x, w, b, one, one, one, c.groups);
    return at::conv3d(x, w, b, one, one, one, c.groups);
}

void check(const Case &c, uint64_t seed) {
    at::manual_seed(seed);
    const double in_scale = 0.025;
    const at::Tensor x = at::randn(c.input) + (c.in == U8 && c.in_zp == 0 ? 1.5 : 0.0);
    const at::Tensor qx = at::quantize_per_tensor(c.in == U8 && c.in_zp == 0 ? x.clamp_min(0) : x, in_scale,
                                                  c.in_zp, c.in);
    const at::Tensor w = at::randn(c.weight) * 0.2;
    const at::Tensor bias = at::randn({c.weight[0]}) * 0.1;
    const auto wscales = per_channel_weight_scales(w);
    // The weights as the kernels hold them: on a CPU without VNNI, 7-bit weights
    // (int8_weight_scale_factor), or 8-bit ones oneDNN halves, rounding half to even.
    const at::Tensor kernel_scales = at::tensor(wscales, at::TensorOptions().dtype(at::kDouble)) *
                                     int8_weight_scale_factor(c.in, c.kind, c.groups);
    at::Tensor w_deq = at::quantize_per_channel(w, kernel_scales, at::zeros({w.size(0)}, at::kLong), 0, at::kQInt8)
                           .dequantize();
    if (int8_weights_halved_by_onednn(c.in, c.kind, c.groups)) {
        const at::Tensor per_channel =
            kernel_scales.to(at::kFloat).reshape({-1, 1}).expand({w.size(0), w.numel() / w.size(0)});
        const at::Tensor q = (w_deq.reshape({w.size(0), -1}) / per_channel).round();
        w_deq = ((q * 0.5).round() * 2 * per_channel).reshape(w.sizes());
    }
    at::Tensor ref = reference(c, qx, w_deq, bias);
    if (c.relu) ref = ref.relu();
    at::Tensor qother;
    const double other_scale = 0.04;
    const int64_t other_zp = c.other == S8 ? 0 : 100;
    if (c.sum) {
        qother = at::quantize_per_tensor(at::randn(ref.sizes()), other_scale, other_zp, c.other);
        if (ref.dim() == 4) qother = qother.contiguous(at::MemoryFormat::ChannelsLast);
        ref = ref + qother.dequantize().to(at::kDouble);
        if (c.sum_relu) ref = ref.relu();
    }
    const auto [out_scale, out_zp] = params_for(ref, c.out);
    const at::Tensor expected = requantize(ref, out_scale, out_zp, c.out);

    Int8Params p;
    p.kind = c.kind;
    if (c.kind != "linear") p.stride = p.padding = p.dilation = std::vector<int64_t>(c.input.size() - 2, 1);
    p.groups = c.groups;
    p.in_scale = in_scale;
    p.in_zero_point = c.in_zp;
    p.out_scale = out_scale;
    p.out_zero_point = out_zp;
    p.in_dtype = c.in;
    p.out_dtype = c.out;
    p.other_dtype = c.other;
    p.relu = c.relu;
    p.sum = c.sum;
    p.sum_relu = c.sum_relu;
    p.sum_in_place = c.in_place;
    p.other_scale = other_scale;
    p.other_zero_point = other_zp;
    Int8Context ctx(w, bias, wscales, p);
    const c10::optional<at::Tensor> other = c.sum ? c10::optional<at::Tensor>(qother.clone()) : c10::nullopt;
    const at::Tensor got = ctx.run(qx, other);
    ASSERT_TRUE(got.is_quantized());
    EXPECT_EQ(got.scalar_type(), c.out);
    EXPECT_EQ(got.sizes(), ref.sizes());
    EXPECT_DOUBLE_EQ(got.q_scale(), out_scale);
    EXPECT_EQ(got.q_zero_point(), out_zp);
    const at::Tensor values = got.int_repr().to(at::kLong);
    EXPECT_LE((values - expected).abs().max().item<int64_t>(), kMaxStepDiff) << ctx.describe();
    // Not a degenerate case: the output uses much of its range, negative values included for s8.
    EXPECT_GT((values.max() - values.min()).item<int64_t>(), 100) << ctx.describe();
    if (c.out == S8 && !c.relu && !c.sum_relu) EXPECT_LT(values.min().item<int64_t>(), -50);

    // The pickled state keeps the dtypes.
    auto again = Int8Context::from_state(ctx.state());
    EXPECT_EQ(again->params().in_dtype, c.in);
    EXPECT_EQ(again->params().out_dtype, c.out);
    EXPECT_EQ(again->params().other_dtype, c.other);
    const c10::optional<at::Tensor> other2 = c.sum ? c10::optional<at::Tensor>(qother.clone()) : c10::nullopt;
    EXPECT_TRUE(at::equal(again->run(qx, other2).int_repr(), got.int_repr()));
}

TEST(Int8S8, Conv2dS8ToS8) { check({"conv2d", {2, 8, 9, 9}, {16, 8, 3, 3}, S8, S8}, 21); }
TEST(Int8S8, Conv2dU8ToS8) { check({"conv2d", {2, 8, 9, 9}, {16, 8, 3, 3}, U8, S8}, 22); }
TEST(Int8S8, Conv2dS8ToU8Relu) {
    Case c{"conv2d", {2, 8, 9, 9}, {16, 8, 3, 3}, S8, U8};
    c.relu = true;
    check(c, 23);
}
TEST(Int8S8, Conv2dS8ReluStaysS8) {
    Case c{"conv2d", {2, 8, 9, 9}, {16, 8, 3, 3}, S8, S8};
    c.relu = true;
    check(c, 24);
}
TEST(Int8S8, GroupedConv2dS8) {
    Case c{"conv2d", {2, 8, 9, 9}, {12, 4, 3, 3}, S8, S8};
    c.groups = 2;
    check(c, 25);
}
TEST(Int8S8, Conv1dS8) { check({"conv1d", {2, 6, 20}, {10, 6, 3}, S8, S8}, 26); }
TEST(Int8S8, Conv3dS8) { check({"conv3d", {1, 4, 6, 6, 6}, {8, 4, 3, 3, 3}, S8, S8}, 27); }
TEST(Int8S8, Conv2dSumS8) {
    Case c{"conv2d", {2, 8, 7, 7}, {8, 8, 3, 3}, S8, S8, S8};
    c.sum = true;
    check(c, 28);
}
TEST(Int8S8, Conv2dSumS8OtherReluToU8InPlace) {
    Case c{"conv2d", {2, 8, 7, 7}, {8, 8, 3, 3}, S8, U8, S8};
    c.sum = c.sum_relu = c.in_place = true;
    check(c, 29);
}
TEST(Int8S8, Conv2dU8InputSumU8OtherToS8) {
    Case c{"conv2d", {2, 8, 7, 7}, {8, 8, 3, 3}, U8, S8, U8};
    c.sum = true;
    check(c, 30);
}
TEST(Int8S8, LinearS8Rank3) { check({"linear", {2, 5, 32}, {24, 32}, S8, S8}, 31); }
TEST(Int8S8, LinearS8ToU8Relu) {
    Case c{"linear", {6, 32}, {24, 32}, S8, U8};
    c.relu = true;
    check(c, 32);
}
TEST(Int8S8, LinearSumS8) {
    Case c{"linear", {6, 32}, {24, 32}, S8, S8, S8};
    c.sum = true;
    check(c, 33);
}
// A hand-edited s8 zero point that is not 0 (the qconfig allows [-128, 127]).
TEST(Int8S8, Conv2dS8InputZeroPoint) {
    Case c{"conv2d", {2, 8, 9, 9}, {16, 8, 3, 3}, S8, S8};
    c.in_zp = -20;
    check(c, 34);
}
TEST(Int8S8, LinearS8InputZeroPoint) {
    Case c{"linear", {6, 32}, {24, 32}, S8, U8};
    c.in_zp = 17;
    check(c, 35);
}

TEST(Int8S8, RejectsInputOfTheOtherType) {
    Int8Params p;
    p.kind = "linear";
    p.in_scale = p.out_scale = 0.1;
    p.in_dtype = S8;
    Int8Context ctx(at::randn({4, 8}), c10::nullopt, std::vector<double>(4, 0.01), p);
    EXPECT_THROW(ctx.run(at::quantize_per_tensor(at::rand({2, 8}), 0.1, 0, U8), c10::nullopt), c10::Error);
    EXPECT_NO_THROW(ctx.run(at::quantize_per_tensor(at::rand({2, 8}), 0.1, 0, S8), c10::nullopt));
    Int8Params bad = p;
    bad.out_dtype = at::kFloat;
    EXPECT_THROW(Int8Context(at::randn({4, 8}), c10::nullopt, std::vector<double>(4, 0.01), bad), c10::Error);
}

// Models saved before s8 support (state version 1) load as all-u8 ops.
TEST(Int8S8, ReadsVersion1StateAsU8) {
    Int8Params p;
    p.kind = "linear";
    p.in_scale = p.out_scale = 0.1;
    p.in_dtype = p.out_dtype = S8;
    Int8Context ctx(at::randn({4, 8}), c10::nullopt, std::vector<double>(4, 0.01), p);
    Int8Context::State state = ctx.state();
    std::get<0>(state) = 1;
    std::get<7>(state) = {};
    auto old = Int8Context::from_state(state);
    EXPECT_EQ(old->params().in_dtype, U8);
    EXPECT_EQ(old->params().out_dtype, U8);
    std::get<0>(state) = 3;
    EXPECT_THROW(Int8Context::from_state(state), c10::Error);
    std::get<0>(state) = 2;
    std::get<7>(state) = {12, 13, 6};  // 6 is float
    EXPECT_THROW(Int8Context::from_state(state), c10::Error);
}

at::Tensor dequantize_bf16(const at::Tensor &q) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::dequantize_bf16", "")
                               .typed<at::Tensor(const at::Tensor &)>();
    return op.call(q);
}

// ipex::dequantize_bf16 against (q - zero point) * scale in fp64, within one bf16 rounding.
TEST(DequantizeBf16, MatchesFp64ReferenceAndKeepsLayout) {
    at::manual_seed(40);
    for (const auto &[dtype, zp] : {std::pair<at::ScalarType, int64_t>{U8, 0}, {U8, 131}, {S8, 0}, {S8, -7}}) {
        const at::Tensor q = at::quantize_per_tensor(at::randn({2, 5, 7, 3}) * 3, 0.0371, zp, dtype)
                                 .contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor got = dequantize_bf16(q);
        EXPECT_EQ(got.scalar_type(), at::kBFloat16);
        EXPECT_EQ(got.sizes(), q.sizes());
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
        const at::Tensor ref = (q.int_repr().to(at::kDouble) - zp) * 0.0371;
        const double err = ((got.to(at::kDouble) - ref).abs() / ref.abs().clamp_min(1e-30)).max().item<double>();
        EXPECT_LE(err, 1.0 / 256) << c10::toString(dtype) << " zp " << zp;
        EXPECT_GT(ref.abs().max().item<double>(), 1.0);
    }
    EXPECT_THROW(dequantize_bf16(at::rand({3})), c10::Error);
}

}  // namespace
}  // namespace ipex::quant
