// FLOP formulas of the profiler against references built from aten's own output shapes:
// a convolution does (input channels per group) * prod(kernel) multiply-adds per output
// element, a matmul k per output element.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "bench/op_flops.h"
#include "ops/conv_context.h"
#include "ops/linear_context.h"
#include "ops/int8/int8_context.h"

namespace {

using ipex::bench::ConvShape;

std::vector<int64_t> v(at::IntArrayRef a) { return a.vec(); }

// Boxed arguments as RecordFunction hands them over.
c10::ArrayRef<const c10::IValue> boxed(const std::vector<c10::IValue> &args) {
    return c10::ArrayRef<const c10::IValue>(args.data(), args.size());
}

// 2 * outputs * (C_in / groups) * prod(kernel), the output shape from aten itself.
int64_t reference_conv_flops(const at::Tensor &x, const at::Tensor &w, at::IntArrayRef stride,
                             at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
    const at::Tensor y = at::convolution(x, w, {}, stride, padding, dilation, false, {0}, groups);
    return 2 * y.numel() * w[0].numel();
}

TEST(OpFlops, ConvolutionWithGroupsStrideDilationPadding) {
    struct Case {
        std::vector<int64_t> input, weight, stride, padding, dilation;
        int64_t groups;
    };
    const std::vector<Case> cases = {
        {{2, 8, 17, 19}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
        {{2, 8, 17, 19}, {16, 2, 3, 5}, {2, 3}, {1, 2}, {2, 1}, 4},   // groups, uneven stride/dilation
        {{1, 12, 15, 15}, {12, 1, 3, 3}, {2, 2}, {0, 0}, {1, 1}, 12},  // depthwise
        {{3, 4, 31}, {6, 2, 4}, {3}, {2}, {2}, 2},                      // 1-D
        {{1, 4, 7, 9, 8}, {8, 4, 3, 3, 1}, {1, 2, 1}, {1, 1, 0}, {1, 1, 1}, 1},  // 3-D
    };
    for (const auto &c : cases) {
        const at::Tensor x = at::zeros(c.input), w = at::zeros(c.weight);
        ConvShape shape{c.input, c.weight, c.stride, c.padding, c.dilation, {}, false, false};
        EXPECT_EQ(ipex::bench::conv_flops(shape), reference_conv_flops(x, w, c.stride, c.padding, c.dilation, c.groups))
            << c10::str(at::IntArrayRef(c.weight));
    }
    // One value standing for every spatial dim, and an unbatched input.
    ConvShape one{{8, 17, 19}, {16, 8, 3, 3}, {2}, {1}, {1}, {}, false, false};
    EXPECT_EQ(ipex::bench::conv_flops(one),
              reference_conv_flops(at::zeros({1, 8, 17, 19}), at::zeros({16, 8, 3, 3}), {2, 2}, {1, 1}, {1, 1}, 1));
    // padding='same' keeps the spatial size.
    ConvShape same{{1, 8, 10, 10}, {4, 8, 3, 3}, {1}, {}, {2}, {}, false, true};
    EXPECT_EQ(ipex::bench::conv_flops(same), 2 * 4 * 100 * 8 * 9);
}

TEST(OpFlops, TransposedConvolutionCountsInputPositions) {
    // weight [C_in, C_out/groups, k...]: every input element meets C_out/groups * prod(k) weights.
    const at::Tensor x = at::zeros({2, 8, 5, 6}), w = at::zeros({8, 3, 3, 3});
    ConvShape shape{v(x.sizes()), v(w.sizes()), {2, 2}, {1, 1}, {1, 1}, {1, 1}, true, false};
    // (groups 2: C_out = 6.) Products that land in the border padding crops are counted too.
    EXPECT_EQ(ipex::bench::conv_flops(shape), 2 * x.numel() * w[0].numel());
    EXPECT_EQ(ipex::bench::conv_flops(shape), 2 * 2 * 8 * 30 * 3 * 9);
}

// 2 * outputs * k, the output shape from aten::matmul.
int64_t reference_matmul_flops(at::IntArrayRef a, at::IntArrayRef b) {
    return 2 * at::matmul(at::zeros(a), at::zeros(b)).numel() * a.back();
}

TEST(OpFlops, MatmulBroadcastsLikeAten) {
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
        {{5, 7}, {7, 3}},          {{4, 5, 7}, {7, 3}},          {{7}, {7, 3}},
        {{4, 5, 7}, {7}},          {{7}, {7}},                   {{2, 1, 5, 7}, {3, 7, 4}},
        {{6, 5, 7}, {6, 7, 2}},    {{1, 5, 7}, {3, 2, 7, 4}},    {{7}, {2, 3, 7, 4}},
    };
    for (const auto &[a, b] : cases)
        EXPECT_EQ(ipex::bench::matmul_flops(a, b), reference_matmul_flops(a, b))
            << c10::str(at::IntArrayRef(a), " @ ", at::IntArrayRef(b));
}

TEST(OpFlops, Linear) {
    EXPECT_EQ(ipex::bench::linear_flops({4, 9, 32}, 32, 10), 2 * 36 * 32 * 10);
    EXPECT_EQ(ipex::bench::linear_flops({32}, 32, 10), 2 * 32 * 10);
}

TEST(OpFlops, Attention) {
    // q [B, H, Lq, D], k [B, H, Lk, D], v [B, H, Lk, Dv]: scores and weighted sum.
    EXPECT_EQ(ipex::bench::attention_flops({2, 4, 10, 16}, {2, 4, 12, 16}, {2, 4, 12, 8}),
              2 * 8 * 10 * 12 * 16 + 2 * 8 * 10 * 12 * 8);
    // Broadcast batch dims (one key/value head for all query heads).
    EXPECT_EQ(ipex::bench::attention_flops({3, 4, 10, 16}, {3, 1, 12, 16}, {3, 1, 12, 16}),
              2 * 12 * 10 * 12 * 16 * 2);
}

TEST(OpFlops, Recurrent) {
    ipex::bench::RnnShape lstm{true, 7, 3, 10, 20, 2, true};
    // Layer 0: in 10; layer 1: in 2 * 20 (both directions of layer 0); 4 gates, 2 directions.
    const int64_t expected = 2 * 7 * 3 * 4 * 20 * (10 + 20) * 2 + 2 * 7 * 3 * 4 * 20 * (40 + 20) * 2;
    EXPECT_EQ(ipex::bench::rnn_flops(lstm), expected);
    ipex::bench::RnnShape gru{false, 5, 2, 8, 16, 1, false};
    EXPECT_EQ(ipex::bench::rnn_flops(gru), 2 * 5 * 2 * 3 * 16 * (8 + 16));
}

TEST(OpFlops, OpKindTable) {
    using ipex::bench::OpKind;
    EXPECT_EQ(ipex::bench::op_kind("ipex::convolution_sum_"), OpKind::kConvolution);
    EXPECT_EQ(ipex::bench::op_kind("ipex::linear_binary"), OpKind::kLinear);
    EXPECT_EQ(ipex::bench::op_kind("ipex::woq_linear"), OpKind::kLinear);
    EXPECT_EQ(ipex::bench::op_kind("ipex::attention"), OpKind::kAttention);
    EXPECT_EQ(ipex::bench::op_kind("aten::baddbmm"), OpKind::kMatmul);
    EXPECT_EQ(ipex::bench::op_kind("aten::layer_norm"), OpKind::kOther);
    EXPECT_STREQ(ipex::bench::op_kind_name(OpKind::kRecurrent), "rnn");
}

TEST(OpFlops, OpWorkFromBoxedArguments) {
    // aten::conv2d(input, weight, bias, stride, padding, dilation, groups)
    const at::Tensor x = at::zeros({2, 8, 17, 19}, at::kBFloat16), w = at::zeros({16, 2, 3, 3}, at::kBFloat16);
    std::vector<c10::IValue> conv{x, w, c10::IValue(), std::vector<int64_t>{2, 1}, std::vector<int64_t>{1, 1},
                                  std::vector<int64_t>{1, 2}, int64_t{4}};
    auto work = ipex::bench::op_work("aten::conv2d", boxed(conv));
    EXPECT_EQ(work.dtype, "bf16");
    EXPECT_EQ(work.flops, reference_conv_flops(x.to(at::kFloat), w.to(at::kFloat), {2, 1}, {1, 1}, {1, 2}, 4));
    // aten::addmm(bias, a, b, beta, alpha)
    std::vector<c10::IValue> addmm{at::zeros({3}), at::zeros({5, 7}), at::zeros({7, 3}), 1, 1};
    EXPECT_EQ(ipex::bench::op_work("aten::addmm", boxed(addmm)).flops, 2 * 5 * 7 * 3);
    // ipex ops read the weight shape from their context.
    auto lin = c10::make_intrusive<ipex::ops::LinearContext>(at::ones({10, 32}), c10::nullopt, "fp32",
                                                             ipex::ops::PostOps{}, 4);
    std::vector<c10::IValue> linear{at::zeros({4, 9, 32}), c10::IValue(lin)};
    work = ipex::bench::op_work("ipex::linear", boxed(linear));
    EXPECT_EQ(work.dtype, "fp32");
    EXPECT_EQ(work.flops, 2 * 36 * 32 * 10);
    ipex::ops::ConvParams p{{2, 2}, {1, 1}, {1, 1}, {}, 2, false};
    auto cctx = c10::make_intrusive<ipex::ops::ConvolutionContext>(at::ones({8, 2, 3, 3}), c10::nullopt, p, "fp32",
                                                                   ipex::ops::PostOps{}, false,
                                                                   std::vector<int64_t>{1, 4, 9, 9});
    std::vector<c10::IValue> conv_ipex{at::zeros({1, 4, 9, 9}), c10::IValue(cctx)};
    EXPECT_EQ(ipex::bench::op_work("ipex::convolution", boxed(conv_ipex)).flops,
              reference_conv_flops(at::zeros({1, 4, 9, 9}), at::ones({8, 2, 3, 3}), {2, 2}, {1, 1}, {1, 1}, 2));
    // A chain, and a chain that ends in a max pooling: the convolutions' FLOPs (each at the sizes
    // the one before gives it), the pooling none; its window and stride in the signature.
    auto second = c10::make_intrusive<ipex::ops::ConvolutionContext>(
        at::ones({6, 8, 1, 1}), c10::nullopt, ipex::ops::ConvParams{{1, 1}, {0, 0}, {1, 1}, {}, 1, false}, "fp32",
        ipex::ops::PostOps{}, false, std::vector<int64_t>{});
    c10::List<c10::intrusive_ptr<ipex::ops::ConvolutionContext>> contexts;
    contexts.push_back(cctx);
    contexts.push_back(second);
    const int64_t chain_flops =
        reference_conv_flops(at::zeros({1, 4, 9, 9}), at::ones({8, 2, 3, 3}), {2, 2}, {1, 1}, {1, 1}, 2) +
        reference_conv_flops(at::zeros({1, 8, 5, 5}), at::ones({6, 8, 1, 1}), {1, 1}, {0, 0}, {1, 1}, 1);
    std::vector<c10::IValue> chain{at::zeros({1, 4, 9, 9}), c10::IValue(contexts)};
    EXPECT_EQ(ipex::bench::op_work("ipex::convolution_chain", boxed(chain)).flops, chain_flops);
    std::vector<c10::IValue> pooled{at::zeros({1, 4, 9, 9}), c10::IValue(contexts), std::vector<int64_t>{3, 3},
                                    std::vector<int64_t>{2, 1}, std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1},
                                    true};
    work = ipex::bench::op_work("ipex::convolution_max_pool", boxed(pooled));
    EXPECT_EQ(work.kind, ipex::bench::OpKind::kConvolution);
    EXPECT_EQ(work.flops, chain_flops);
    EXPECT_EQ(ipex::bench::op_signature("ipex::convolution_max_pool", boxed(pooled)),
              "1x4x9x9 w 8x2x3x3 s2 p1 d1 g2 -> w 6x8x1x1 s1 p0 d1 g1 -> max_pool 3x3 s2x1");
    // The same two as a graph program (each reads the value before it); a program that does not
    // fit them counts nothing.
    std::vector<c10::IValue> graph{at::zeros({1, 4, 9, 9}), c10::IValue(contexts), std::vector<int64_t>{0, -1, 1, -1}};
    work = ipex::bench::op_work("ipex::convolution_graph", boxed(graph));
    EXPECT_EQ(work.kind, ipex::bench::OpKind::kConvolution);
    EXPECT_EQ(work.flops, chain_flops);
    EXPECT_EQ(ipex::bench::op_signature("ipex::convolution_graph", boxed(graph)),
              "1x4x9x9 2 convolutions: w 8x2x3x3 s2 p1 d1 g2 .. w 6x8x1x1 s1 p0 d1 g1");
    std::vector<c10::IValue> unfit{at::zeros({1, 4, 9, 9}), c10::IValue(contexts), std::vector<int64_t>{0, -1, 2, -1}};
    EXPECT_EQ(ipex::bench::op_work("ipex::convolution_graph", boxed(unfit)).flops, 0);
}

// ipex::int8_conv_max_pool: the convolution's FLOPs (the pooling none), an int8 convolution row.
TEST(OpFlops, Int8ConvolutionAndPooling) {
    ipex::quant::Int8Params p;
    p.kind = "conv2d";
    p.stride = {2, 2};
    p.padding = {3, 3};
    p.dilation = {1, 1};
    const at::Tensor w = at::ones({16, 3, 7, 7});
    auto ctx = c10::make_intrusive<ipex::quant::Int8Context>(w, c10::nullopt, std::vector<double>(16, 0.01), p);
    const at::Tensor x = at::quantize_per_tensor(at::zeros({2, 3, 30, 28}), 0.1, 0, at::kQUInt8);
    std::vector<c10::IValue> args{x,
                                  c10::IValue(ctx),
                                  std::vector<int64_t>{3, 3},
                                  std::vector<int64_t>{2, 2},
                                  std::vector<int64_t>{1, 1},
                                  std::vector<int64_t>{1, 1},
                                  false};
    const auto work = ipex::bench::op_work("ipex::int8_conv_max_pool", boxed(args));
    EXPECT_EQ(work.kind, ipex::bench::OpKind::kConvolution);
    EXPECT_EQ(work.dtype, "int8");
    EXPECT_EQ(work.flops, reference_conv_flops(at::zeros({2, 3, 30, 28}), w, {2, 2}, {3, 3}, {1, 1}, 1));
    EXPECT_EQ(ipex::bench::op_signature("ipex::int8_conv_max_pool", boxed(args)),
              "2x3x30x28 conv2d w 16x3x7x7 s2 p3 d1 g1 -> max_pool k3 s2");
}

}  // namespace
