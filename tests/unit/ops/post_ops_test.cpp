// Fused post-ops of the prepacked ops against aten applied to an fp64 reference: every
// elementwise kind, chains, the residual sum (scale, dtype promotion, in place, broadcast
// fallback) and the linear binary add/mul.
#include <gtest/gtest.h>

#include "ops/conv_context.h"
#include "ops/linear_context.h"
#include "ops/post_ops.h"
#include "unit/ops/ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using testing::expect_close;

const ConvParams kConv2d{{1, 1}, {1, 1}, {1, 1}, {}, 1, false};

at::Tensor apply_reference(at::Tensor y, const PostOps &ops) {
    for (const auto &op : ops) y = testing::reference_eltwise(y, op);
    return y;
}

std::vector<PostOps> eltwise_cases() {
    return {
        {{"relu"}},
        {{"leaky_relu", 0.2}},
        {{"clip", -0.5, 1.5}},
        {{"clip", 0.0, 6.0}},
        {{"gelu_erf"}},
        {{"gelu_tanh"}},
        {{"silu"}},
        {{"sigmoid"}},
        {{"tanh"}},
        {{"hardswish"}},
        {{"elu", 1.0}},
        {{"elu", 0.7}},
        // chains of two
        {{"relu"}, {"clip", 0.0, 1.0}},
        {{"gelu_tanh"}, {"sigmoid"}},
        {{"leaky_relu", 0.1}, {"tanh"}},
        {{"silu"}, {"hardswish"}},
    };
}

class OpsPostOps : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        IPEX_SKIP_WITHOUT_ONEDNN_DTYPE(GetParam());
        at::manual_seed(3);
    }
};

TEST_P(OpsPostOps, ConvEltwiseMatchesAten) {
    const std::string dtype = GetParam();
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3, b = at::randn({8}) * 0.5;
    const at::Tensor x = at::randn({2, 4, 7, 9});
    const at::Tensor conv = testing::reference_conv(x, w, b, kConv2d);
    for (const PostOps &ops : eltwise_cases()) {
        ConvolutionContext ctx(w, b, kConv2d, dtype, ops, false, {});
        expect_close(ctx.run(x, c10::nullopt), apply_reference(conv, ops), dtype, describe(ops) + " " + dtype);
    }
}

TEST_P(OpsPostOps, LinearEltwiseMatchesAten) {
    const std::string dtype = GetParam();
    const at::Tensor w = at::randn({24, 40}) * 0.3, b = at::randn({24}) * 0.5;
    const at::Tensor x = at::randn({3, 5, 40});
    const at::Tensor lin = testing::reference_linear(x, w, b);
    for (const PostOps &ops : eltwise_cases()) {
        LinearContext ctx(w, b, dtype, ops, 0);
        expect_close(ctx.run(x, c10::nullopt), apply_reference(lin, ops), dtype, describe(ops) + " " + dtype);
    }
}

// The same post-ops appended later with with_post_ops (as the fusion passes do).
TEST_P(OpsPostOps, WithPostOpsAppends) {
    const std::string dtype = GetParam();
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3, b = at::randn({8});
    const at::Tensor x = at::randn({1, 4, 7, 9});
    ConvolutionContext base(w, b, kConv2d, dtype, {{"leaky_relu", 0.2}}, false, {});
    const auto extended = base.with_post_ops({{"clip", -0.1, 0.8}}, false);
    EXPECT_EQ(base.post_ops().size(), 1u);
    ASSERT_EQ(extended->post_ops().size(), 2u);
    const at::Tensor conv = testing::reference_conv(x, w, b, kConv2d);
    expect_close(base.run(x, c10::nullopt), at::leaky_relu(conv, 0.2), dtype, "base");
    expect_close(extended->run(x, c10::nullopt), at::clamp(at::leaky_relu(conv, 0.2), -0.1, 0.8), dtype, "extended");

    const at::Tensor lw = at::randn({6, 4});
    LinearContext lin(lw, c10::nullopt, dtype, {}, 0);
    const auto gelu = lin.with_post_ops({{"gelu_erf"}});
    const at::Tensor lx = at::randn({3, 4});
    expect_close(gelu->run(lx, c10::nullopt), at::gelu(testing::reference_linear(lx, lw, at::Tensor())), dtype,
                 "linear gelu");
}

// conv(x) + scale * other, then relu; `other` in the output dtype and in fp32.
TEST_P(OpsPostOps, ConvSumWithScale) {
    const std::string dtype = GetParam();
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3, b = at::randn({8});
    const at::Tensor x = at::randn({3, 4, 7, 9});
    const at::Tensor other = at::randn({3, 8, 7, 9});
    ConvolutionContext ctx(w, b, kConv2d, dtype, {{"sum", 0.5}, {"relu"}}, false, {});
    const at::Tensor want = at::relu(testing::reference_conv(x, w, b, kConv2d) + 0.5 * other.to(at::kDouble));
    const at::Tensor other_copy = other.clone();
    const at::Tensor got = ctx.run(x, other);
    EXPECT_TRUE(other.equal(other_copy)) << "not in place: other must be left as it was";
    EXPECT_EQ(got.scalar_type(), at::kFloat);  // fp32 other promotes a bf16 context's output
    EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
    expect_close(got, want, dtype, "sum(0.5)+relu " + dtype);

    // `other` in the context's own output dtype keeps that dtype.
    const at::Tensor other_native = other.to(testing::output_type(dtype));
    const at::Tensor native = ctx.run(x, other_native);
    EXPECT_EQ(native.scalar_type(), testing::output_type(dtype));
    const at::Tensor want_native =
        at::relu(testing::reference_conv(x, w, b, kConv2d) + 0.5 * other_native.to(at::kDouble));
    expect_close(native, want_native, dtype, "sum native other " + dtype);

    // An `other` broadcasting to the output shape ([C, 1, 1]) fuses as well.
    const at::Tensor per_channel = at::randn({1, 8, 1, 1});
    expect_close(ctx.run(x, per_channel),
                 at::relu(testing::reference_conv(x, w, b, kConv2d) + 0.5 * per_channel.to(at::kDouble)), dtype,
                 "per-channel other " + dtype);
}

// An `other` that broadcasts the output to a larger shape takes the unfused path and gives
// the broadcast result.
TEST_P(OpsPostOps, ConvSumBroadcastingOutputFallsBack) {
    const std::string dtype = GetParam();
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3, b = at::randn({8});
    const at::Tensor x = at::randn({1, 4, 7, 9});
    const at::Tensor other = at::randn({3, 8, 7, 9});
    ConvolutionContext ctx(w, b, kConv2d, dtype, {{"sum", 2.0}, {"sigmoid"}}, false, {});
    const at::Tensor got = ctx.run(x, other);
    EXPECT_EQ(got.sizes(), other.sizes());
    expect_close(got, at::sigmoid(testing::reference_conv(x, w, b, kConv2d) + 2.0 * other.to(at::kDouble)), dtype,
                 "broadcast sum " + dtype);
}

// Linear + add/mul: a [N] row, a full tensor, a tensor broadcasting the output.
TEST_P(OpsPostOps, LinearBinary) {
    const std::string dtype = GetParam();
    const at::Tensor w = at::randn({24, 40}) * 0.3, b = at::randn({24});
    const at::Tensor x = at::randn({2, 5, 40});
    const at::Tensor lin = testing::reference_linear(x, w, b);
    const at::Tensor row = at::randn({24}), full = at::randn({2, 5, 24}), mid = at::randn({5, 24});
    LinearContext add(w, b, dtype, {{"add"}}, 0);
    LinearContext mul(w, b, dtype, {{"mul"}}, 0);
    LinearContext add_relu(w, b, dtype, {{"add"}, {"relu"}}, 0);
    LinearContext gelu_mul(w, b, dtype, {{"gelu_tanh"}, {"mul"}}, 0);
    const auto d = [](const at::Tensor &t) { return t.to(at::kDouble); };
    expect_close(add.run(x, row), lin + d(row), dtype, "add row");
    expect_close(add.run(x, full), lin + d(full), dtype, "add full");
    expect_close(add.run(x, mid), lin + d(mid), dtype, "add [5, N]");
    expect_close(mul.run(x, row), lin * d(row), dtype, "mul row");
    expect_close(mul.run(x, full), lin * d(full), dtype, "mul full");
    expect_close(add_relu.run(x, full), at::relu(lin + d(full)), dtype, "add + relu");
    expect_close(gelu_mul.run(x, full), at::gelu(lin, "tanh") * d(full), dtype, "gelu_tanh + mul");
    // Non-contiguous other.
    const at::Tensor full_t = full.transpose(0, 1).contiguous().transpose(0, 1);
    expect_close(add.run(x, full_t), lin + d(full), dtype, "add non-contiguous full");
    EXPECT_EQ(add.run(x, full).scalar_type(), at::promote_types(testing::output_type(dtype), at::kFloat));
    // Output broadcast to a larger shape: unfused fallback.
    const at::Tensor bigger = at::randn({4, 2, 5, 24});
    const at::Tensor got = add_relu.run(x, bigger);
    EXPECT_EQ(got.sizes(), bigger.sizes());
    expect_close(got, at::relu(lin + d(bigger)), dtype, "add broadcasting the output");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OpsPostOps, ::testing::Values("fp32", "bf32", "bf16"));

class OpsSum : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(4); }
};

// A bf16 context summing an fp32 tensor: the output is promoted to fp32.
TEST_F(OpsSum, Fp32OtherOnBf16ContextPromotes) {
    IPEX_SKIP_WITHOUT_ONEDNN_DTYPE("bf16");
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3;
    const at::Tensor x = at::randn({2, 4, 7, 9}).to(at::kBFloat16);
    const at::Tensor other = at::randn({2, 8, 7, 9});
    ConvolutionContext ctx(w.to(at::kBFloat16), c10::nullopt, kConv2d, "bf16", {{"sum", 1.0}}, false, {});
    const at::Tensor got = ctx.run(x, other);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    expect_close(got, testing::reference_conv(x, w.to(at::kBFloat16), at::Tensor(), kConv2d) + other.to(at::kDouble),
                 "bf16", "bf16 ctx + fp32 other");
}

// sum_in_place: the result is `other`'s buffer when dtype, shape and layout match, and a new
// tensor (other untouched) otherwise.
TEST_F(OpsSum, InPlaceSharesOtherStorage) {
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3, b = at::randn({8});
    const at::Tensor x = at::randn({2, 4, 7, 9});
    const at::Tensor other_values = at::randn({2, 8, 7, 9});
    const at::Tensor want = testing::reference_conv(x, w, b, kConv2d) + other_values.to(at::kDouble);
    ConvolutionContext ctx(w, b, kConv2d, "fp32", {{"sum", 1.0}}, true, {});

    const at::Tensor other = other_values.contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor got = ctx.run(x, other);
    EXPECT_EQ(got.data_ptr(), other.data_ptr());
    EXPECT_TRUE(got.is_alias_of(other));
    expect_close(got, want, "fp32", "in place");

    // Contiguous NCHW other: not the dst layout, so a new tensor; other unchanged.
    const at::Tensor nchw = other_values.clone();
    const at::Tensor got2 = ctx.run(x, nchw);
    EXPECT_NE(got2.data_ptr(), nchw.data_ptr());
    EXPECT_TRUE(nchw.equal(other_values));
    expect_close(got2, want, "fp32", "in place, NCHW other");

    // A bf16 other into an fp32 context: dtype differs, not in place.
    const at::Tensor low = other_values.to(at::kBFloat16).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor low_copy = low.clone();
    const at::Tensor got3 = ctx.run(x, low);
    EXPECT_NE(got3.data_ptr(), low.data_ptr());
    EXPECT_TRUE(low.equal(low_copy));
    EXPECT_EQ(got3.scalar_type(), at::kFloat);

    // Without sum_in_place a matching other is not written.
    ConvolutionContext copy_ctx(w, b, kConv2d, "fp32", {{"sum", 1.0}}, false, {});
    const at::Tensor other2 = other_values.contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor got4 = copy_ctx.run(x, other2);
    EXPECT_NE(got4.data_ptr(), other2.data_ptr());
    EXPECT_TRUE(other2.equal(other_values));
    expect_close(got4, want, "fp32", "copy");
}

// Sums on 1-D and 3-D convolutions and transposed ones, unbatched too.
TEST_F(OpsSum, OtherRanksAndUnbatched) {
    const ConvParams p1{{2}, {1}, {1}, {}, 1, false};
    const at::Tensor w1 = at::randn({6, 4, 3}) * 0.3;
    ConvolutionContext c1(w1, c10::nullopt, p1, "fp32", {{"sum", 1.0}, {"tanh"}}, false, {});
    const at::Tensor x1 = at::randn({4, 15});
    const at::Tensor o1 = at::randn({6, 8});
    expect_close(c1.run(x1, o1), at::tanh(testing::reference_conv(x1.unsqueeze(0), w1, at::Tensor(), p1).squeeze(0) +
                                          o1.to(at::kDouble)),
                 "fp32", "1-D unbatched sum");

    const ConvParams p3{{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, true};
    const at::Tensor w3 = at::randn({4, 3, 3, 3, 3}) * 0.3;
    ConvolutionContext c3(w3, c10::nullopt, p3, "fp32", {{"sum", -1.5}}, false, {});
    const at::Tensor x3 = at::randn({2, 4, 3, 4, 5});
    const at::Tensor want3 = testing::reference_conv(x3, w3, at::Tensor(), p3);
    const at::Tensor o3 = at::randn(want3.sizes());
    expect_close(c3.run(x3, o3), want3 - 1.5 * o3.to(at::kDouble), "fp32", "3-D transposed sum");
}

TEST_F(OpsSum, ErrorsAndRules) {
    const at::Tensor w = at::randn({8, 4, 3, 3});
    ConvolutionContext ctx(w, c10::nullopt, kConv2d, "fp32", {{"sum", 1.0}}, false, {});
    const std::string msg = testing::error_of([&] { ctx.run(at::randn({1, 4, 7, 9}), c10::nullopt); });
    EXPECT_NE(msg.find("needs a second tensor"), std::string::npos) << msg;
    const std::string add = testing::error_of([&] { ConvolutionContext(w, c10::nullopt, kConv2d, "fp32", {{"add"}}, false, {}); });
    EXPECT_NE(add.find("only tensor post-op of a convolution is sum"), std::string::npos) << add;
    ConvolutionContext summed(w, c10::nullopt, kConv2d, "fp32", {{"sum", 1.0}}, false, {});
    const std::string twice = testing::error_of([&] { summed.with_post_ops({{"sum", 1.0}}, false); });
    EXPECT_NE(twice.find("at most one"), std::string::npos) << twice;
    // An `other` that cannot broadcast with the output.
    const std::string shape = testing::error_of([&] { ctx.run(at::randn({1, 4, 7, 9}), at::randn({1, 5, 7, 9})); });
    EXPECT_FALSE(shape.empty());
}

// A second tensor of another dtype than the output: the result follows aten's type
// promotion (as the unfused graph did), whatever the fused primitive supports.
TEST_F(OpsSum, OtherOfAnotherDtypeFollowsAten) {
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3, b = at::randn({8});
    const at::Tensor x = at::randn({2, 4, 7, 9});
    ConvolutionContext conv(w, b, kConv2d, "fp32", {{"sum", 1.0}}, false, {});
    const at::Tensor other64 = at::randn({2, 8, 7, 9}, at::kDouble);
    const at::Tensor ref = testing::reference_conv(x, w, b, kConv2d);
    at::Tensor got;
    const std::string msg = testing::error_of([&] { got = conv.run(x, other64); });
    EXPECT_EQ(msg, "") << "conv sum with an fp64 other";
    if (msg.empty()) {
        EXPECT_EQ(got.scalar_type(), at::kDouble);
        expect_close(got, ref + other64, "fp32", "conv sum fp64 other");
    }

    const at::Tensor lw = at::randn({6, 5}), lb = at::randn({6});
    const at::Tensor lx = at::randn({3, 5});
    const at::Tensor lref = testing::reference_linear(lx, lw, lb);
    LinearContext add(lw, lb, "fp32", {{"add"}}, 0);
    LinearContext mul(lw, lb, "fp32", {{"mul"}}, 0);
    const at::Tensor ints = at::randint(-3, 3, {3, 6}, at::kLong);
    const at::Tensor mask = at::rand({6}) > 0.5;
    const std::string add_msg = testing::error_of([&] { got = add.run(lx, ints); });
    EXPECT_EQ(add_msg, "") << "linear add with an int64 other";
    if (add_msg.empty()) {
        EXPECT_EQ(got.scalar_type(), at::kFloat);
        expect_close(got, lref + ints.to(at::kDouble), "fp32", "linear add int64 other");
    }
    const std::string mul_msg = testing::error_of([&] { got = mul.run(lx, mask); });
    EXPECT_EQ(mul_msg, "") << "linear mul with a bool other";
    if (mul_msg.empty()) {
        EXPECT_EQ(got.scalar_type(), at::kFloat);
        expect_close(got, lref * mask.to(at::kDouble), "fp32", "linear mul bool other");
    }
}

// No post-op list sends a convolution to oneDNN's reference kernel where the plain convolution
// has a jit one: the context fuses the longest leading part a jit kernel takes and computes the
// rest with aten, with the same values (the summand kept when the sum runs in place).
TEST_P(OpsPostOps, ConvNeverFallsToTheReferenceKernel) {
    const std::string dtype = GetParam();
    const std::vector<PostOps> lists{
        {{"relu"}, {"sum", 1.0}, {"relu"}}, {{"relu"}, {"sum", 1.0}},          {{"sum", 1.0}, {"relu"}},
        {{"clip", 0.0, 6.0}, {"sum", 0.5}, {"hardswish"}}, {{"gelu_erf"}, {"sum", 1.0}}, {{"relu"}, {"tanh"}},
    };
    const std::vector<std::pair<std::vector<int64_t>, ConvParams>> shapes{
        {{16, 32, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, {}, 1, false}},
        {{16, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {}, 1, false}},
        {{16, 32, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, {}, 1, false}},
        {{32, 8, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {}, 4, false}},
    };
    const std::vector<int64_t> input{2, 32, 10, 12};
    int split = 0;
    for (const auto &[weight_sizes, params] : shapes) {
        const at::Tensor w = at::randn(weight_sizes) * 0.2, b = at::randn({weight_sizes[0]});
        const at::Tensor x = at::randn(input);
        const at::Tensor conv = testing::reference_conv(x, w, b, params);
        const at::ScalarType out_type = testing::output_type(dtype);
        const ConvolutionContext plain_ctx(w, b, params, dtype, {}, false, {});
        const std::string plain = plain_ctx.onednn_kernel(input, out_type).first;
        for (const PostOps &ops : lists) {
            const std::string what = describe(ops) + " " + dtype + " weight " + c10::str(at::IntArrayRef(weight_sizes));
            ConvolutionContext ctx(w, b, params, dtype, ops, true, {});
            const auto [kernel, fused] = ctx.onednn_kernel(input, out_type);
            EXPECT_LE(fused, ops.size()) << what;
            if (plain.rfind("ref", 0) != 0) EXPECT_NE(kernel.rfind("ref", 0), 0u) << what << ": " << kernel;
            split += fused < ops.size();
            // The reference: the post-ops in order, the sum adding `other`.
            const at::Tensor other = at::randn(conv.sizes()).contiguous(at::MemoryFormat::ChannelsLast);
            at::Tensor want = conv;
            for (const PostOp &op : ops)
                want = op.kind == "sum" ? want + op.alpha * other.to(at::kDouble)
                                        : testing::reference_eltwise(want, op);
            const at::Tensor other_values = other.clone();
            const bool sums = tensor_post_op(ops) >= 0;
            expect_close(ctx.run(x, sums ? c10::optional<at::Tensor>(other.clone()) : c10::nullopt), want, dtype, what);
            if (!sums) continue;
            // In place: the summand is `other`'s own buffer, overwritten by the convolution.
            const at::Tensor got = ctx.run(x, other, true);
            EXPECT_EQ(got.data_ptr(), other.data_ptr()) << what;
            expect_close(got, want, dtype, what + " in place");
        }
    }
    RecordProperty("post_op_lists_split", split);
    // oneDNN 2.6's AVX2 1x1 kernel takes no relu+sum+relu (it was the reference kernel's, 100x
    // slower): on such CPUs this test checks the split path.
    if (dtype == "fp32" && !__builtin_cpu_supports("avx512f")) EXPECT_GT(split, 0);
}

TEST(OpsPostOpsData, DescribeAndPickle) {
    const PostOps ops{{"sum", 0.5}, {"clip", 0.0, 6.0}, {"leaky_relu", 0.2}};
    EXPECT_EQ(describe(ops), "sum(0.5)+clip(0,6)+leaky_relu(0.2)");
    EXPECT_EQ(tensor_post_op(ops), 0);
    const PostOps back = from_pickled(kinds_of(ops), params_of(ops));
    ASSERT_EQ(back.size(), 3u);
    EXPECT_EQ(back[1].kind, "clip");
    EXPECT_EQ(back[1].beta, 6.0);
    EXPECT_EQ(back[2].alpha, 0.2);
    EXPECT_TRUE(is_eltwise_kind("hardswish"));
    EXPECT_FALSE(is_eltwise_kind("sum"));
    const std::string bad = testing::error_of([] { validate({{"relu"}, {"softmax"}}); });
    EXPECT_NE(bad.find("unknown post-op 'softmax'"), std::string::npos) << bad;
}

}  // namespace
}  // namespace ipex::ops
