// ipex int8 ops against a naive reference: fp32 convolution/linear of the dequantized
// operands, requantized to the output parameters; results may differ by one step (rounding).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "ops/int8/int8_context.h"
#include "quant/observers.h"

namespace ipex::quant {
namespace {

// The weights' scales as the kernels use them for u8 activations (int8_weight_scale_factor:
// 7-bit weights on a CPU without VNNI), for references that quantize the weights the same way.
at::Tensor kernel_scales(const std::vector<double> &scales) {
    return at::tensor(scales, at::TensorOptions().dtype(at::kDouble)) *
           int8_weight_scale_factor(at::kQUInt8, "linear", 1);
}

constexpr int64_t kMaxStepDiff = 1;

struct Case {
    std::string kind;
    std::vector<int64_t> input, weight;
    std::vector<int64_t> stride, padding, dilation;
    int64_t groups = 1;
    int64_t in_zp = 0, out_zp = 0;
    bool relu = false, sum = false, sum_relu = false, in_place = false;
};

at::Tensor quantize(const at::Tensor &x, double scale, int64_t zp) {
    return at::quantize_per_tensor(x, scale, zp, at::kQUInt8);
}

void check(const Case &c, uint64_t seed) {
    at::manual_seed(seed);
    const at::Tensor x = at::randn(c.input) + (c.in_zp ? 0.0 : 1.0);
    const at::Tensor w = at::randn(c.weight) * 0.2;
    const at::Tensor bias = at::randn({c.weight[0]}) * 0.1;
    const double in_scale = 0.03;
    const at::Tensor qx = quantize(x.clamp_min(c.in_zp ? -1e9 : 0.0), in_scale, c.in_zp);
    const auto wscales = per_channel_weight_scales(w);
    const at::Tensor ws = kernel_scales(wscales);
    const at::Tensor w_deq =
        at::quantize_per_channel(w, ws, at::zeros({w.size(0)}, at::kLong), 0, at::kQInt8).dequantize();

    at::Tensor ref;
    if (c.kind == "linear") ref = at::linear(qx.dequantize(), w_deq, bias);
    else if (c.kind == "conv1d") ref = at::conv1d(qx.dequantize(), w_deq, bias, c.stride, c.padding, c.dilation, c.groups);
    else if (c.kind == "conv2d") ref = at::conv2d(qx.dequantize(), w_deq, bias, c.stride, c.padding, c.dilation, c.groups);
    else ref = at::conv3d(qx.dequantize(), w_deq, bias, c.stride, c.padding, c.dilation, c.groups);
    if (c.relu) ref = ref.relu();
    at::Tensor qother;
    if (c.sum) {
        const at::Tensor other = at::randn(ref.sizes());
        qother = quantize(other, 0.05, 3);
        if (ref.dim() == 4) qother = qother.contiguous(at::MemoryFormat::ChannelsLast);
        ref = ref + qother.dequantize();
        if (c.sum_relu) ref = ref.relu();
    }
    const double out_scale = (ref.max() - ref.min()).item<double>() / 255.0;
    const int64_t out_zp = c.out_zp ? std::clamp<int64_t>(std::llround(-ref.min().item<double>() / out_scale), 0, 255) : 0;
    const at::Tensor expected = quantize(out_zp ? ref : ref.clamp_min(0), out_scale, out_zp).int_repr().to(at::kInt);

    Int8Params p;
    p.kind = c.kind;
    p.stride = c.stride;
    p.padding = c.padding;
    p.dilation = c.dilation;
    p.groups = c.groups;
    p.in_scale = in_scale;
    p.in_zero_point = c.in_zp;
    p.out_scale = out_scale;
    p.out_zero_point = out_zp;
    p.relu = c.relu;
    p.sum = c.sum;
    p.sum_relu = c.sum_relu;
    p.sum_in_place = c.in_place;
    p.other_scale = 0.05;
    p.other_zero_point = 3;
    Int8Context ctx(w, bias, wscales, p);
    const c10::optional<at::Tensor> other = c.sum ? c10::optional<at::Tensor>(qother.clone()) : c10::nullopt;
    const at::Tensor got = ctx.run(qx, other);
    ASSERT_TRUE(got.is_quantized());
    EXPECT_EQ(got.sizes(), ref.sizes());
    EXPECT_DOUBLE_EQ(got.q_scale(), out_scale);
    const int64_t diff = (got.int_repr().to(at::kInt) - expected).abs().max().item<int64_t>();
    EXPECT_LE(diff, kMaxStepDiff) << c.kind;

    // A pickled context (state round trip) computes the same.
    auto again = Int8Context::from_state(ctx.state());
    const c10::optional<at::Tensor> other2 = c.sum ? c10::optional<at::Tensor>(qother.clone()) : c10::nullopt;
    EXPECT_TRUE(at::equal(again->run(qx, other2).int_repr(), got.int_repr()));
}

TEST(Int8Ops, Conv2dRelu) { check({"conv2d", {2, 8, 9, 9}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, 0, 0, true}, 1); }
TEST(Int8Ops, Conv2dStridedGroupedZeroPoints) {
    check({"conv2d", {2, 8, 11, 11}, {12, 4, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 2, 128, 1}, 2);
}
TEST(Int8Ops, DepthwiseDilated) { check({"conv2d", {1, 8, 12, 12}, {8, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 8}, 3); }
TEST(Int8Ops, OneInputChannel) { check({"conv2d", {4, 1, 8, 8}, {16, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, 0, 0, true}, 4); }
TEST(Int8Ops, Conv1d) { check({"conv1d", {2, 6, 20}, {10, 6, 5}, {1}, {2}, {1}, 1, 0, 1}, 5); }
TEST(Int8Ops, Conv3d) { check({"conv3d", {1, 4, 6, 6, 6}, {8, 4, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 0, 1}, 6); }
TEST(Int8Ops, Conv2dSumRelu) {
    check({"conv2d", {2, 8, 7, 7}, {8, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, 0, 0, false, true, true}, 7);
}
TEST(Int8Ops, Conv2dReluSumInPlace) {
    check({"conv2d", {2, 8, 7, 7}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, 0, 1, true, true, false, true}, 8);
}
TEST(Int8Ops, Linear) { check({"linear", {6, 32}, {24, 32}, {}, {}, {}, 1, 0, 1, false}, 9); }
TEST(Int8Ops, LinearRank3ZeroPointRelu) { check({"linear", {2, 5, 32}, {24, 32}, {}, {}, {}, 1, 77, 0, true}, 10); }

// The residual operand is the convolution's own input (x + conv(x)): never overwritten in place.
TEST(Int8Ops, SumWithItsOwnInputIsNotInPlace) {
    at::manual_seed(11);
    const at::Tensor x = at::rand({2, 8, 6, 6});
    const at::Tensor qx = quantize(x, 0.01, 0).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w = at::randn({8, 8, 3, 3}) * 0.1;
    const auto wscales = per_channel_weight_scales(w);
    const at::Tensor w_deq = at::quantize_per_channel(w, kernel_scales(wscales),
                                                      at::zeros({8}, at::kLong), 0, at::kQInt8).dequantize();
    const at::Tensor ref = (at::conv2d(qx.dequantize(), w_deq, {}, 1, 1) + qx.dequantize()).relu();
    const double out_scale = ref.max().item<double>() / 255.0;
    Int8Params p;
    p.kind = "conv2d";
    p.stride = {1, 1};
    p.padding = {1, 1};
    p.dilation = {1, 1};
    p.in_scale = 0.01;
    p.out_scale = out_scale;
    p.sum = p.sum_relu = p.sum_in_place = true;
    p.other_scale = 0.01;
    Int8Context ctx(w, c10::nullopt, wscales, p);
    const at::Tensor before = qx.int_repr().clone();
    const at::Tensor got = ctx.run(qx, qx);
    EXPECT_TRUE(at::equal(qx.int_repr(), before)) << "the input was overwritten";
    const at::Tensor expected = quantize(ref, out_scale, 0).int_repr().to(at::kInt);
    EXPECT_LE((got.int_repr().to(at::kInt) - expected).abs().max().item<int64_t>(), kMaxStepDiff);
}

// An int8 linear fed 50 sequence lengths keeps one packed copy of its weights (the runtime
// layer's weight cache) and a bounded primitive cache, and stays right at every length.
TEST(Int8Ops, FiftySequenceLengthsKeepOnePackedWeight) {
    at::manual_seed(12);
    const at::Tensor w = at::randn({24, 32}) * 0.2;
    const auto wscales = per_channel_weight_scales(w);
    const at::Tensor w_deq = at::quantize_per_channel(w, kernel_scales(wscales),
                                                      at::zeros({24}, at::kLong), 0, at::kQInt8).dequantize();
    Int8Params p;
    p.kind = "linear";
    p.in_scale = 0.02;
    p.out_scale = 0.05;
    p.out_zero_point = 128;
    Int8Context ctx(w, c10::nullopt, wscales, p);
    for (int64_t i = 1; i <= 50; ++i) {
        const int64_t length = (i * 37) % 211 + 1;
        const at::Tensor qx = quantize(at::rand({2, length, 32}), 0.02, 0);
        const at::Tensor ref = at::linear(qx.dequantize(), w_deq);
        const at::Tensor expected = quantize(ref, 0.05, 128).int_repr().to(at::kInt);
        const at::Tensor got = ctx.run(qx, c10::nullopt);
        ASSERT_EQ(got.sizes(), ref.sizes());
        EXPECT_LE((got.int_repr().to(at::kInt) - expected).abs().max().item<int64_t>(), kMaxStepDiff) << length;
    }
    EXPECT_EQ(ctx.packed_layouts(), 1u);
    EXPECT_LE(ctx.cached_shapes(), 16u);
}

TEST(Int8Ops, RejectsInputOfOtherParameters) {
    Int8Params p;
    p.kind = "linear";
    p.in_scale = 0.1;
    p.out_scale = 0.1;
    Int8Context ctx(at::randn({4, 8}), c10::nullopt, std::vector<double>(4, 0.01), p);
    EXPECT_THROW(ctx.run(quantize(at::rand({2, 8}), 0.2, 0), c10::nullopt), c10::Error);
    EXPECT_THROW(ctx.run(at::rand({2, 8}), c10::nullopt), c10::Error);
    EXPECT_THROW(ctx.run(quantize(at::rand({2, 9}), 0.1, 0), c10::nullopt), c10::Error);
}

}  // namespace
}  // namespace ipex::quant
