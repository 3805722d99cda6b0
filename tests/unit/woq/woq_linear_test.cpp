// ipex::woq_linear against an fp32 matmul on the dequantized weight, for every kernel path
// (batch-1/small-batch gemv, dequantize+matmul, int8 activations), int4/int8, group sizes
// aligned and not, padded input channels, act-order permutations and bias.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include "base/errors.h"
#include "base/isa.h"
#include "checkpoint/woq_format.h"
#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_layout.h"
#include "ops/woq/woq_linear.h"
#include "unit/woq/woq_test_utils.h"

namespace {

using ipex::woq::WoqLayer;

struct Case {
    int bits;
    int64_t n, k, group_size;
    bool act_order;
};

WoqLayer make(const Case &c, uint64_t seed) {
    at::manual_seed(seed);
    const at::Tensor w = at::randn({c.n, c.k}) * 0.1;
    const at::Tensor bias = at::randn({c.n});
    WoqLayer l = ipex::woq::quantize_rtn("l", w, bias, c.bits, c.group_size);
    if (!c.act_order) return l;
    // Same values, channels shuffled into groups by a random g_idx.
    const int64_t gs = c.group_size == -1 ? c.k : c.group_size;
    const at::Tensor q = ipex::woq::unpack_weight(l.qweight, c.bits, c.k);
    const at::Tensor g_idx = at::randperm(c.k).div(gs, "floor");
    const at::Tensor zeros = at::randint(0, 1 << c.bits, {c.n, c.k / gs}).to(at::kFloat);
    return ipex::woq::make_layer("l", q, g_idx, l.scales, zeros, bias, c.bits, gs);
}

at::Tensor run(const WoqLayer &l, const at::Tensor &x, const std::string &mode) {
    return ipex::woq::woq_linear(x, l.qweight, l.scales, l.zeros, l.bias,
                                 l.perm.defined() ? c10::optional<at::Tensor>(l.perm) : c10::nullopt, l.bits,
                                 l.group_size, l.in_features, mode);
}

// Largest error relative to the largest reference magnitude.
double rel_err(const at::Tensor &got, const at::Tensor &want) {
    return (got.to(at::kFloat) - want).abs().max().item<double>() / want.abs().max().item<double>();
}

void check_case(const Case &c) {
    const WoqLayer l = make(c, 7 + c.n + c.k + c.group_size);
    const at::Tensor w = ipex::woq::dequantize(l);
    for (const int64_t m : {int64_t(1), int64_t(3), int64_t(5), ipex::woq::kMatmulRows + 3}) {
        const at::Tensor x = at::randn({m, c.k});
        const at::Tensor want = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t()).add(l.bias.to(at::kDouble)).to(at::kFloat);
        const std::string what = "bits " + std::to_string(c.bits) + " n " + std::to_string(c.n) + " k " +
                                 std::to_string(c.k) + " gs " + std::to_string(c.group_size) + " m " + std::to_string(m);
        for (const bool portable : {false, true}) {
            ipex::woq::set_force_portable_kernels(portable);
            EXPECT_LT(rel_err(run(l, x, "fp32"), want), 2e-5) << what << " fp32 portable=" << portable;
            EXPECT_LT(rel_err(run(l, x, "bf16"), want), 2e-2)
                << what << " bf16 portable=" << portable;
            EXPECT_LT(rel_err(run(l, x, "int8"), want), 3e-2) << what << " int8 portable=" << portable;
        }
        ipex::woq::set_force_portable_kernels(false);
    }
}

}  // namespace

TEST(WoqLinear, Int4GroupedAligned) { check_case({4, 37, 256, 32, false}); }
TEST(WoqLinear, Int4Group128) { check_case({4, 64, 512, 128, false}); }
TEST(WoqLinear, Int4PerChannelPaddedK) { check_case({4, 19, 100, -1, false}); }
TEST(WoqLinear, Int4GroupNotBlockAligned) { check_case({4, 21, 96, 16, false}); }
TEST(WoqLinear, Int4ActOrder) { check_case({4, 40, 128, 32, true}); }
// Wide enough that the large-batch path runs several weight blocks and a shorter last one.
TEST(WoqLinear, Int4SeveralMatmulBlocks) { check_case({4, 600, 4096, 128, false}); }
TEST(WoqLinear, Int8Grouped) { check_case({8, 33, 192, 64, false}); }
TEST(WoqLinear, Int8PerChannelPaddedK) { check_case({8, 8, 72, -1, false}); }

TEST(WoqLinear, KeepsDtypeAndLeadingShape) {
    const WoqLayer l = make({4, 16, 64, 32, false}, 3);
    const at::Tensor x = at::randn({2, 3, 64}).to(at::kBFloat16);
    const at::Tensor y = run(l, x, "bf16");
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_EQ(y.sizes(), at::IntArrayRef({2, 3, 16}));
}

TEST(WoqLinear, RejectsInconsistentArguments) {
    const WoqLayer l = make({4, 16, 64, 32, false}, 4);
    EXPECT_THROW(run(l, at::randn({1, 65}), "fp32"), c10::Error);
    EXPECT_THROW(run(l, at::randn({1, 64}), "fp16"), c10::Error);
    EXPECT_THROW(ipex::woq::woq_linear(at::randn({1, 64}), l.qweight, l.scales, l.zeros, c10::nullopt, c10::nullopt,
                                       4, 48, 64, "fp32"),
                 c10::Error);
    EXPECT_THROW(ipex::woq::woq_linear(at::randn({1, 64}), l.qweight.narrow(1, 0, 16).contiguous(), l.scales,
                                       l.zeros, c10::nullopt, c10::nullopt, 4, 32, 64, "fp32"),
                 c10::Error);
}

TEST(WoqLinear, RegisteredAsTorchScriptOp) {
    const WoqLayer l = make({4, 16, 64, 32, false}, 5);
    auto op = c10::Dispatcher::singleton().findSchemaOrThrow("ipex::woq_linear", "");
    const at::Tensor x = at::randn({1, 64});
    auto typed = op.typed<at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &, const at::Tensor &,
                                     const c10::optional<at::Tensor> &, const c10::optional<at::Tensor> &, int64_t,
                                     int64_t, int64_t, c10::string_view)>();
    const at::Tensor y = typed.call(x, l.qweight, l.scales, l.zeros, l.bias, c10::nullopt, 4, 32, 64, "fp32");
    EXPECT_TRUE(at::allclose(y, run(l, x, "fp32")));
}

TEST(WoqFormat, PackUnpackRoundTripsAndDequantizeMatchesFormula) {
    at::manual_seed(11);
    const at::Tensor q = at::randint(0, 16, {5, 70}).to(at::kByte);
    const at::Tensor packed = ipex::woq::pack_weight(q, 4);
    EXPECT_EQ(packed.sizes(), at::IntArrayRef({5, 48}));  // 70 -> 96 channels, 2 per byte
    EXPECT_TRUE(at::equal(ipex::woq::unpack_weight(packed, 4, 70), q));
    // Byte j of a block: channel j low nibble, channel j + 16 high nibble.
    EXPECT_EQ(packed[0][3].item<uint8_t>(), q[0][3].item<uint8_t>() | (q[0][19].item<uint8_t>() << 4));
    const at::Tensor q8 = at::randint(0, 256, {3, 40}).to(at::kByte);
    EXPECT_TRUE(at::equal(ipex::woq::unpack_weight(ipex::woq::pack_weight(q8, 8), 8, 40), q8));
}

TEST(WoqFormat, ActOrderRegroupsToTheGcdOfGroupRuns) {
    // Groups of 4 and 2 channels (non-uniform): kernel groups of 2, each with its source group.
    const at::Tensor g_idx = at::tensor({1, 0, 0, 1, 0, 0}, at::kLong);
    const at::Tensor q = at::arange(6, at::kByte).unsqueeze(0);
    const at::Tensor scales = at::tensor({0.5f, 2.0f}).unsqueeze(0);
    const at::Tensor zeros = at::tensor({1.0f, 3.0f}).unsqueeze(0);
    const WoqLayer l = ipex::woq::make_layer("l", q, g_idx, scales, zeros, at::Tensor(), 4, 3);
    EXPECT_TRUE(l.act_order);
    EXPECT_EQ(l.group_size, 2);
    const at::Tensor want = at::tensor({(0 - 3) * 2.0f, (1 - 1) * 0.5f, (2 - 1) * 0.5f, (3 - 3) * 2.0f,
                                        (4 - 1) * 0.5f, (5 - 1) * 0.5f}).unsqueeze(0);
    EXPECT_TRUE(at::equal(ipex::woq::dequantize(l), want)) << ipex::woq::dequantize(l);
}

TEST(WoqFormat, RoundToNearestErrorIsAtMostHalfAStep) {
    at::manual_seed(12);
    const at::Tensor w = at::randn({24, 128});
    for (const int bits : {4, 8})
        for (const int64_t gs : {int64_t(32), int64_t(-1)}) {
            const WoqLayer l = ipex::woq::quantize_rtn("l", w, at::Tensor(), bits, gs);
            const int64_t g = gs == -1 ? 128 : gs;
            const at::Tensor step = l.scales.repeat_interleave(g, 1);
            const at::Tensor err = (ipex::woq::dequantize(l) - w).abs();
            EXPECT_TRUE((err <= step * 0.5 + 1e-6).all().item<bool>()) << "bits " << bits << " gs " << gs;
            EXPECT_GT(err.max().item<float>(), 0.f);
        }
    EXPECT_THROW(ipex::woq::quantize_rtn("l", w, at::Tensor(), 4, 48), ipex::Error);
}

// The AVX2 kernels called directly (woq_linear prefers the AVX-512 ones where they run): the
// dequantization equals the portable one bit for bit, the products agree with it to rounding.
TEST(WoqKernels, Avx2KernelsMatchPortable) {
    if (!ipex::isa::avx2_fma()) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
    namespace k = ipex::woq::kernels;
    // int4: per channel (odd and even block counts, K past the padding), g32 (even and odd
    // group counts), g64/g128/g512 (whole pairs; g512 flushes its 16-bit sums inside the group),
    // g96 (the generic path); odd row counts leave rows for the one-row tail.
    for (const Case &c : {Case{4, 9, 200, -1, false}, Case{4, 8, 256, 64, false}, Case{8, 5, 96, 32, false},
                          Case{8, 7, 300, -1, false}, Case{4, 7, 256, 32, false}, Case{4, 6, 288, 32, false},
                          Case{4, 11, 512, 128, false}, Case{4, 5, 1024, 512, false}, Case{4, 3, 96, 96, false},
                          Case{4, 10, 640, -1, false}, Case{4, 13, 32, 32, false}, Case{8, 6, 256, 128, false}}) {
        const WoqLayer l = make(c, 23);
        const k::WeightView w = ipex::woq::testing::view_of(l);
        at::Tensor f = at::full({c.n, c.k + 5}, -1.f), fr = f.clone();
        k::dequant_f32_avx2(w, f.data_ptr<float>(), c.k + 5, 0, c.n);
        k::dequant_f32_ref(w, fr.data_ptr<float>(), c.k + 5, 0, c.n);
        EXPECT_TRUE(at::equal(f, fr)) << "bits " << c.bits << " k " << c.k;
        for (const int64_t m : {1, 2, 5}) {
            const at::Tensor x = at::constant_pad_nd(at::randn({m, c.k}), {0, w.kp - c.k}, 0).contiguous();
            const at::Tensor xsum = x.narrow(1, 0, c.k).reshape({m, w.groups, -1}).sum(2).contiguous();
            at::Tensor got = at::empty({m, c.n}), want = at::empty({m, c.n});
            k::gemv_f32_avx2(w, {x.data_ptr<float>(), xsum.data_ptr<float>(), m, got.data_ptr<float>(), c.n}, 0, c.n);
            k::gemv_f32_ref(w, {x.data_ptr<float>(), xsum.data_ptr<float>(), m, want.data_ptr<float>(), c.n}, 0, c.n);
            EXPECT_LT(rel_err(got, want), 1e-5) << "fp32 bits " << c.bits << " k " << c.k << " m " << m;
            // int8 activations: integer sums, so equal up to the final fp32 scaling.
            const at::Tensor xq = at::randint(-127, 128, {m, w.kp}, at::kChar).index_put_(
                {at::indexing::Slice(), at::indexing::Slice(c.k, at::indexing::None)}, 0);
            const at::Tensor qsum = xq.narrow(1, 0, c.k).to(at::kInt).reshape({m, w.groups, -1}).sum(2, false, at::kInt).contiguous();
            const at::Tensor xs = at::rand({m}) + 0.01;
            k::gemv_s8_avx2(w, {xq.data_ptr<int8_t>(), xs.data_ptr<float>(), qsum.data_ptr<int32_t>(), m, got.data_ptr<float>(), c.n}, 0, c.n);
            k::gemv_s8_ref(w, {xq.data_ptr<int8_t>(), xs.data_ptr<float>(), qsum.data_ptr<int32_t>(), m, want.data_ptr<float>(), c.n}, 0, c.n);
            EXPECT_LT(rel_err(got, want), 1e-5) << "int8 bits " << c.bits << " k " << c.k << " m " << m;
        }
    }
}

// The extremes of the int8 kernels' 16-bit sums: every weight 15 against every activation
// +127 or -127, over groups of up to 512 channels, must not saturate.
TEST(WoqKernels, Avx2Int8SumsDoNotSaturate) {
    if (!ipex::isa::avx2_fma()) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
    namespace k = ipex::woq::kernels;
    for (const int64_t gs : {int64_t(32), int64_t(128), int64_t(512), int64_t(-1)}) {
        WoqLayer l = make(Case{4, 5, 1024, gs, false}, 29);
        l.qweight.fill_(0xff);
        const k::WeightView w = ipex::woq::testing::view_of(l);
        for (const int v : {127, -127}) {
            const at::Tensor xq = at::full({1, w.kp}, v, at::kChar);
            const at::Tensor qsum = xq.to(at::kInt).reshape({1, w.groups, -1}).sum(2, false, at::kInt).contiguous();
            const at::Tensor xs = at::ones({1});
            at::Tensor got = at::empty({1, 5}), want = at::empty({1, 5});
            k::gemv_s8_avx2(w, {xq.data_ptr<int8_t>(), xs.data_ptr<float>(), qsum.data_ptr<int32_t>(), 1, got.data_ptr<float>(), 5}, 0, 5);
            k::gemv_s8_ref(w, {xq.data_ptr<int8_t>(), xs.data_ptr<float>(), qsum.data_ptr<int32_t>(), 1, want.data_ptr<float>(), 5}, 0, 5);
            EXPECT_LT(rel_err(got, want), 1e-5) << "group " << gs << " x " << v;
        }
    }
}

// The activation quantizer of the int8 path: the AVX2 version equals the portable one.
TEST(WoqKernels, Avx2QuantizeS8MatchesPortable) {
    if (!ipex::isa::avx2_fma()) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
    namespace k = ipex::woq::kernels;
    at::manual_seed(31);
    for (const auto &[k_in, gs] : {std::pair<int64_t, int64_t>{200, 200}, {256, 32}, {96, 16}, {1000, 8}, {64, 64}}) {
        const int64_t m = 3, kp = ipex::woq::padded_in_features(k_in), groups = k_in / gs;
        at::Tensor x = at::randn({m, k_in}) * 3;
        x[1].zero_();
        x[2][5] = 0.5f * x[2].abs().max().item<float>() / 127.f * 255.f;  // a tie or two on the way
        const at::Tensor xq = at::full({m, kp}, 99, at::kChar), xq_ref = xq.clone();
        const at::Tensor s = at::empty({m}), s_ref = s.clone();
        const at::Tensor sum = at::empty({m, groups}, at::kInt), sum_ref = sum.clone();
        k::quantize_s8_avx2({x.data_ptr<float>(), m, k_in, kp, gs, xq.data_ptr<int8_t>(), s.data_ptr<float>(), sum.data_ptr<int32_t>()});
        k::quantize_s8_ref({x.data_ptr<float>(), m, k_in, kp, gs, xq_ref.data_ptr<int8_t>(), s_ref.data_ptr<float>(), sum_ref.data_ptr<int32_t>()});
        EXPECT_TRUE(at::equal(xq, xq_ref)) << "k " << k_in;
        EXPECT_TRUE(at::equal(s, s_ref)) << "k " << k_in;
        EXPECT_TRUE(at::equal(sum, sum_ref)) << "k " << k_in;
        EXPECT_EQ(s[1].item<float>(), 1.f);
    }
}

TEST(WoqKernels, VectorDequantizationMatchesPortableBitForBit) {
    if (!ipex::isa::avx512_bf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
    for (const Case &c : {Case{4, 9, 200, -1, false}, Case{4, 8, 256, 64, false}, Case{8, 5, 96, 32, false}}) {
        const WoqLayer l = make(c, 21);
        const ipex::woq::kernels::WeightView w = ipex::woq::testing::view_of(l);
        at::Tensor simd = at::zeros({c.n - 1, c.k + 3}, at::kShort), ref = simd.clone();
        ipex::woq::kernels::dequant_bf16_avx512(w, reinterpret_cast<uint16_t *>(simd.data_ptr<int16_t>()), c.k + 3, 1, c.n);
        ipex::woq::kernels::dequant_bf16_ref(w, reinterpret_cast<uint16_t *>(ref.data_ptr<int16_t>()), c.k + 3, 1, c.n);
        EXPECT_TRUE(at::equal(simd, ref)) << "bits " << c.bits << " k " << c.k;
        at::Tensor f = at::zeros({c.n, c.k}), fr = f.clone();
        ipex::woq::kernels::dequant_f32_avx512(w, f.data_ptr<float>(), c.k, 0, c.n);
        ipex::woq::kernels::dequant_f32_ref(w, fr.data_ptr<float>(), c.k, 0, c.n);
        EXPECT_TRUE(at::equal(f, fr));
        EXPECT_TRUE(at::equal(fr, ipex::woq::dequantize(l)));
    }
}
