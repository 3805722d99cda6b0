// Int4Decode (the tiled int4 layout, its AVX512-BF16 decode kernel for up to 8 rows and lib/woq's
// large-batch kernel on the same bytes for more) against an fp64 product of the bf16-rounded
// activations with the dequantized weights, over odd output counts (partial tiles and panels),
// group sizes 32/64/128/256/384/per channel, 1-8 rows and batches around the 16-row blocks
// (the tail rows through the decode kernel), fp32 and bf16 inputs. Batches of groups of 32 or
// 64 channels run on weights rounded to bf16, and the reference rounds them too. The int8 form
// (lowp "int8") against the product of x quantized as documented, over the same kinds of shape.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/isa.h"
#include "llm/int4_decode.h"
#include "llm/kernels.h"
#include "llm/linear.h"
#include "checkpoint/woq_format.h"
#include "ops/woq/woq_kernels.h"

namespace ipex::llm {
namespace {

struct Case {
    int64_t n, k, group, m;
    bool bf16_input;
};

// The weights as the large-batch kernel rounds them for small groups: bf16 of the fp32 rounding
// of scale * (q + 128) - offset, offset = fp32(scale * (zero + 128)) (the fused multiply-subtract
// is exact in fp64 here: a 24-bit scale times an 8-bit code).
at::Tensor rounded_weights(const woq::WoqLayer &l) {
    const at::Tensor q = woq::unpack_weight(l.qweight, 4, l.in_features).to(at::kDouble);
    const at::Tensor s = l.scales.repeat_interleave(l.group_size, 1), z = l.zeros.repeat_interleave(l.group_size, 1);
    const at::Tensor offset = s * (z + 128.f);  // fp32, as the layout holds it
    const at::Tensor value = ((q + 128) * s.to(at::kDouble) - offset.to(at::kDouble)).to(at::kFloat);
    return value.to(at::kBFloat16).to(at::kDouble);
}

// The layout holds scales and zeros in fp16: the references take the layer rounded alike.
woq::WoqLayer fp16_metadata(woq::WoqLayer l) {
    l.scales = l.scales.to(at::kHalf).to(at::kFloat);
    l.zeros = l.zeros.to(at::kHalf).to(at::kFloat);
    return l;
}

void check(const Case &c, uint64_t seed) {
    at::manual_seed(seed);
    const at::Tensor w = at::randn({c.n, c.k}) * 0.05;
    const woq::WoqLayer layer = fp16_metadata(woq::quantize_rtn("t", w, at::Tensor(), 4, c.group));
    const auto decode = Int4Decode::build(layer);
    ASSERT_NE(decode, nullptr);
    at::Tensor x = at::randn({c.m, c.k});
    if (c.bf16_input) x = x.to(at::kBFloat16);
    // Batches of groups under 128 channels take the weights rounded to bf16 (tiled_exact), but
    // for a tail of up to kGemmTailRows rows past the blocks of 16, which the decode kernel runs.
    const at::Tensor xd = x.to(at::kBFloat16).to(at::kDouble);
    at::Tensor ref = at::matmul(xd, woq::dequantize(layer).to(at::kDouble).t());
    const int64_t tail = c.m % 16, rounded = tail <= Int4Decode::kGemmTailRows ? c.m - tail : c.m;
    if (c.m > Int4Decode::kMaxRows && c.group < Int4Decode::kUnit)
        ref.narrow(0, 0, rounded).copy_(at::matmul(xd.narrow(0, 0, rounded), rounded_weights(layer).t()));
    at::Tensor out = at::full({c.m, c.n + 3}, 7.f);  // a wider row stride: columns past n untouched
    decode->run(x, out.data_ptr<float>(), c.n + 3);
    const at::Tensor got = out.narrow(1, 0, c.n).to(at::kDouble);
    const double err = (got - ref).abs().max().item<double>(), scale = ref.abs().max().item<double>();
    EXPECT_LT(err, 2e-5 * scale * std::sqrt(static_cast<double>(c.k))) << c.n << "x" << c.k << " g" << c.group << " m" << c.m;
    EXPECT_TRUE(out.narrow(1, c.n, 3).eq(7.f).all().item<bool>());
}

bool runnable() { return kernels::avx512_ok() && isa::avx512_bf16(); }

TEST(Int4Decode, MatchesTheDequantizedProduct) {
    if (!runnable()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the layout is not built (lib/woq kernels run instead)";
    uint64_t seed = 1;
    for (const Case &c : {Case{8, 128, 128, 1, false}, Case{13, 256, 128, 1, true}, Case{61, 512, 256, 3, false},
                          Case{100, 384, 384, 8, true}, Case{7, 640, 128, 5, false}, Case{257, 1024, 128, 2, true},
                          Case{9, 128, 32, 1, false}, Case{40, 384, 32, 3, true}, Case{17, 256, 64, 8, false},
                          Case{64, 640, 64, 2, true}})
        check(c, seed++);
}

TEST(Int4Decode, NotBuiltWhereTheLayoutDoesNotFit) {
    EXPECT_EQ(Int4Decode::build(woq::quantize_rtn("t", at::randn({16, 192}), at::Tensor(), 4, -1)), nullptr);  // 192 channels
    EXPECT_EQ(Int4Decode::build(woq::quantize_rtn("t", at::randn({16, 256}), at::Tensor(), 4, 16)), nullptr);  // g16
    EXPECT_EQ(Int4Decode::build(woq::quantize_rtn("t", at::randn({16, 384}), at::Tensor(), 4, 96)), nullptr);  // g96
    EXPECT_EQ(Int4Decode::build(woq::quantize_rtn("t", at::randn({16, 256}), at::Tensor(), 8, 128)), nullptr);  // int8
    // Scales outside fp16's normal range, a zero point past 1024 (the layout holds them in fp16).
    for (const float scale : {1e-6f, 1e5f}) {
        woq::WoqLayer l = woq::quantize_rtn("t", at::randn({16, 256}), at::Tensor(), 4, 128);
        l.scales[3][1] = scale;
        EXPECT_EQ(Int4Decode::build(l), nullptr) << scale;
    }
    woq::WoqLayer far = woq::quantize_rtn("t", at::randn({16, 256}), at::Tensor(), 4, 128);
    far.zeros[0][0] = 2000.f;
    EXPECT_EQ(Int4Decode::build(far), nullptr);
    if (runnable())
        EXPECT_NE(Int4Decode::build(woq::quantize_rtn("t", at::randn({16, 256}), at::Tensor(), 4, 128)), nullptr);
}

TEST(Int4Decode, BatchesRunTheLargeBatchKernelOnTheSameBytes) {
    if (!runnable()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the layout is not built (lib/woq kernels run instead)";
    uint64_t seed = 100;
    // 9 (one padded block), 16/32 (whole blocks), 17/20 (a tail of 1/4 rows to the decode
    // kernel), 21/45 (tails the large-batch kernel pads), 150 (two slabs of 8 blocks).
    for (const Case &c : {Case{8, 128, 128, 9, false}, Case{61, 512, 256, 16, true}, Case{57, 384, 32, 17, false},
                          Case{113, 640, 64, 20, true}, Case{120, 384, 384, 21, false}, Case{7, 256, 128, 32, true},
                          Case{130, 1024, 32, 45, false}, Case{64, 256, 64, 150, true}, Case{200, 768, 768, 33, false}})
        check(c, seed++);
}

// x as the int8 kernel quantizes it, back in fp64: per row and 128-channel unit, xscale =
// max|x| / 127 and xq = nearest-even(x * (127 / max|x|)), in fp32 as documented.
at::Tensor int8_activations(const at::Tensor &x) {
    const at::Tensor xf = x.to(at::kFloat).contiguous();
    at::Tensor out = at::empty(xf.sizes(), at::kDouble);
    const int64_t m = xf.size(0), k = xf.size(1);
    const float *src = xf.data_ptr<float>();
    double *dst = out.data_ptr<double>();
    for (int64_t i = 0; i < m; ++i)
        for (int64_t u = 0; u < k; u += Int4Decode::kUnit) {
            float amax = 0.f;
            for (int64_t c = u; c < u + Int4Decode::kUnit; ++c) amax = std::max(amax, std::fabs(src[i * k + c]));
            const float inv = amax == 0.f ? 0.f : 127.f / amax, scale = amax / 127.f;
            for (int64_t c = u; c < u + Int4Decode::kUnit; ++c)
                dst[i * k + c] = std::nearbyint(src[i * k + c] * inv) * static_cast<double>(scale);
        }
    return out;
}

struct Int8Case {
    int64_t n, k, group, m;
    bool bf16_input;
    float zero_shift;  // added to the zero points: non-integer zeros take the fraction term
};

void check_int8(const Int8Case &c, uint64_t seed) {
    at::manual_seed(seed);
    const at::Tensor w = at::randn({c.n, c.k}) * 0.05;
    woq::WoqLayer layer = woq::quantize_rtn("t", w, at::Tensor(), 4, c.group);
    layer.zeros.add_(c.zero_shift);
    layer = fp16_metadata(layer);
    const auto decode = Int4Decode::build(layer, /*int8_activations=*/true);
    ASSERT_NE(decode, nullptr);
    at::Tensor x = at::randn({c.m, c.k});
    x[0].zero_();                          // a row of zeros: scale 0
    x.index_put_({c.m - 1, 5}, 40.f);      // an outlier in one unit of the last row
    if (c.bf16_input) x = x.to(at::kBFloat16);
    const at::Tensor wd = woq::dequantize(layer).to(at::kDouble).t();
    // Rows past the blocks of 16 (up to kGemmTailRows) run through the bf16 decode kernel.
    const int64_t tail = c.m % 16, full = tail <= Int4Decode::kGemmTailRows ? c.m - tail : c.m;
    at::Tensor ref = at::matmul(x.to(at::kBFloat16).to(at::kDouble), wd);
    ref.narrow(0, 0, full).copy_(at::matmul(int8_activations(x.narrow(0, 0, full)), wd));
    at::Tensor out = at::full({c.m, c.n + 3}, 7.f);
    decode->run(x, out.data_ptr<float>(), c.n + 3);
    const at::Tensor got = out.narrow(1, 0, c.n).to(at::kDouble);
    const double err = (got - ref).abs().max().item<double>(), scale = ref.abs().max().item<double>();
    const std::string what = std::to_string(c.n) + "x" + std::to_string(c.k) + " g" + std::to_string(c.group) + " m" +
                             std::to_string(c.m) + " zero+" + std::to_string(c.zero_shift);
    EXPECT_LT(err, 2e-5 * scale * std::sqrt(static_cast<double>(c.k))) << what;
    EXPECT_TRUE(out.narrow(1, c.n, 3).eq(7.f).all().item<bool>()) << what;
    // And near the product with x itself: int8 activations cost about 1% here (but in the last
    // row, whose outlier coarsens its unit's steps 40-fold).
    const at::Tensor exact = at::matmul(x.narrow(0, 0, c.m - 1).to(at::kDouble), wd);
    EXPECT_LT((got.narrow(0, 0, c.m - 1) - exact).norm().item<double>(), 0.02 * exact.norm().item<double>()) << what;
}

TEST(Int4Decode, Int8ActivationBatchesMatchTheQuantizedProduct) {
    if (!runnable() || !isa::avx512_vnni()) GTEST_SKIP() << "this CPU has no AVX512-BF16 and VNNI: the int8 form is not built";
    uint64_t seed = 300;
    // Groups of 32/64 (several pieces a unit), 128, 256/384 and per channel (pieces of a unit
    // spanning units); partial tiles and panels (n not a multiple of 8 or 48); 9 (a padded
    // block), 17/20 (tails to the decode kernel), 21/45/150 (padded tails, two slabs);
    // integer and fractional zero points.
    for (const Int8Case &c :
         {Int8Case{8, 128, 128, 9, false, 0.f}, Int8Case{61, 512, 256, 16, true, 0.f},
          Int8Case{57, 384, 32, 17, false, 0.f}, Int8Case{113, 640, 64, 20, true, 0.25f},
          Int8Case{120, 384, 384, 21, false, 0.5f}, Int8Case{100, 256, 128, 32, true, -0.3f},
          Int8Case{130, 1024, 32, 45, false, 0.7f}, Int8Case{49, 256, 64, 150, true, 0.f},
          Int8Case{200, 768, 768, 33, false, 0.f}, Int8Case{97, 512, 32, 64, true, 0.1f}})
        check_int8(c, seed++);
}

// llm::Linear with lowp "int8": the tiled layout is its one copy, prefill batches quantize x,
// decode steps keep bf16 x.
TEST(Int4Decode, LinearWithInt8ActivationsHoldsTheLayoutOnly) {
    if (!runnable() || !isa::avx512_vnni()) GTEST_SKIP() << "this CPU has no AVX512-BF16 and VNNI: the int8 form is not built";
    if (isa::amx_bf16_present()) GTEST_SKIP() << "with AMX the WOQ layer is kept beside the layout for prefill";
    at::manual_seed(9);
    const at::Tensor w = at::randn({72, 256}) * 0.05, bias = at::randn({72});
    WeightFormat f;
    f.woq_bits = 4;
    f.group_size = 32;
    f.lowp_mode = "int8";
    const Linear l = Linear::from_dense("t", {w}, {bias}, f);
    const woq::WoqLayer layer = fp16_metadata(Linear::quantize("t", w, at::Tensor(), f));
    const at::Tensor wd = woq::dequantize(layer).to(at::kDouble).t();
    const auto tiled = Int4Decode::build(layer, true);
    ASSERT_NE(tiled, nullptr);
    EXPECT_EQ(l.resident_bytes(), tiled->bytes() + bias.nbytes());
    const at::Tensor x = at::randn({32, 256});
    const at::Tensor ref = at::matmul(int8_activations(x), wd) + bias.to(at::kDouble);
    const at::Tensor got = l.forward(x).to(at::kDouble);
    EXPECT_LT((got - ref).abs().max().item<double>(), 1e-4 * ref.abs().max().item<double>());
    const at::Tensor step = at::randn({1, 256});
    const at::Tensor step_ref = at::matmul(step.to(at::kBFloat16).to(at::kDouble), wd) + bias.to(at::kDouble);
    EXPECT_LT((l.forward(step).to(at::kDouble) - step_ref).abs().max().item<double>(),
              1e-4 * step_ref.abs().max().item<double>());
}

// A NaN in a prefill row reaches that row's outputs (and no other row's), as it would with bf16
// activations.
TEST(Int4Decode, Int8ActivationsKeepANaNInItsRow) {
    if (!runnable() || !isa::avx512_vnni()) GTEST_SKIP() << "this CPU has no AVX512-BF16 and VNNI: the int8 form is not built";
    const auto d = Int4Decode::build(woq::quantize_rtn("t", at::randn({24, 256}), at::Tensor(), 4, 32), true);
    ASSERT_NE(d, nullptr);
    at::Tensor x = at::randn({16, 256});
    x.index_put_({3, 200}, std::numeric_limits<float>::quiet_NaN());
    at::Tensor out = at::zeros({16, 24});
    d->run(x, out.data_ptr<float>(), 24);
    EXPECT_TRUE(out[3].isnan().all().item<bool>());
    EXPECT_TRUE(out.index_select(0, at::tensor({0, 1, 2, 4, 15}, at::kLong)).isfinite().all().item<bool>());
}

// Several projections' steps in one parallel region give each one's own run() bit for bit:
// jobs of different widths and group sizes, two of them on the same x (prepared once where the
// grouping allows), rows 1-8, row strides past n.
TEST(Int4Decode, JobsTogetherEqualEachAlone) {
    if (!runnable()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the layout is not built";
    at::manual_seed(11);
    struct Layer {
        int64_t n, k, group;
    };
    const Layer layers[] = {{40, 256, 128}, {24, 256, 128}, {17, 256, 64}, {9, 128, 32}, {300, 512, 256}};
    std::vector<std::unique_ptr<Int4Decode>> d;
    for (const Layer &l : layers) {
        d.push_back(Int4Decode::build(woq::quantize_rtn("t", at::randn({l.n, l.k}) * 0.05, at::Tensor(), 4, l.group)));
        ASSERT_NE(d.back(), nullptr);
    }
    for (const int64_t m : {1, 3, 8}) {
        const at::Tensor x256 = at::randn({m, 256}), x128 = at::randn({m, 128}).to(at::kBFloat16),
                         x512 = at::randn({m, 512});
        const at::Tensor xs[] = {x256, x256, x256, x128, x512};
        std::vector<at::Tensor> together, alone;
        std::vector<Int4Decode::Job> jobs;
        for (size_t i = 0; i < d.size(); ++i) {
            const int64_t n = layers[i].n;
            together.push_back(at::full({m, n + 5}, 3.f));
            alone.push_back(at::full({m, n + 5}, 3.f));
            jobs.push_back({d[i].get(), xs[i], together.back().data_ptr<float>(), n + 5});
            d[i]->run(xs[i], alone.back().data_ptr<float>(), n + 5);
        }
        Int4Decode::decode_jobs(jobs);
        for (size_t i = 0; i < d.size(); ++i) EXPECT_TRUE(together[i].equal(alone[i])) << "layer " << i << " m " << m;
    }
    // Too many rows for a step, or a wrong width: refused before any work.
    std::vector<float> out(9 * 40);
    EXPECT_THROW(Int4Decode::decode_jobs({{d[0].get(), at::randn({9, 256}), out.data(), 40}}), c10::Error);
    EXPECT_THROW(Int4Decode::decode_jobs({{d[0].get(), at::randn({1, 128}), out.data(), 40}}), c10::Error);
}

// Quantizing dense weights straight into the layout gives build(quantize_rtn(...))'s bytes: the
// same outputs bit for bit, over bf16/fp16/fp32 weights, groups of 32/64/128/256 and one per
// row, odd row counts, groups all zero, all positive, all negative or of one value. Weights
// quantize_rtn's path must decide are refused: a NaN or an infinity, scales below fp16's normal
// range, shapes the layout does not take.
TEST(Int4Decode, QuantizeEqualsBuildOfTheRtnLayer) {
    if (!runnable()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the layout is not built";
    at::manual_seed(5);
    struct Shape {
        int64_t n, k, group;
        at::ScalarType type;
    };
    for (const Shape &c : {Shape{8, 128, 128, at::kBFloat16}, Shape{13, 256, 32, at::kFloat},
                           Shape{29, 384, 64, at::kHalf}, Shape{40, 512, 256, at::kBFloat16},
                           Shape{17, 256, -1, at::kFloat}, Shape{3, 1024, 128, at::kBFloat16},
                           // more than 16 groups a row: whole chunks of 16 and a partial one
                           Shape{11, 1280, 32, at::kBFloat16}, Shape{6, 640, 32, at::kHalf}}) {
        at::Tensor w = at::randn({c.n, c.k}) * 0.05;
        const int64_t gs = c.group == -1 ? c.k : c.group;
        w[0].narrow(0, 0, gs).zero_();                              // all zero
        if (c.n > 1) w[1].narrow(0, 0, gs).abs_();                  // all positive
        if (c.n > 2) w[2].narrow(0, 0, gs).abs_().neg_();           // all negative
        if (c.n > 3) w[3].narrow(0, 0, gs).fill_(0.25);             // one value
        w = w.to(c.type);
        const auto direct = Int4Decode::quantize({w}, c.group);
        const auto built = Int4Decode::build(woq::quantize_rtn("t", w, at::Tensor(), 4, c.group));
        ASSERT_NE(direct, nullptr) << c.n << "x" << c.k << " g" << c.group;
        ASSERT_NE(built, nullptr);
        EXPECT_EQ(direct->bytes(), built->bytes());
        for (const int64_t m : {1, 5, 40}) {
            const at::Tensor x = at::randn({m, c.k});
            at::Tensor a = at::empty({m, c.n}), b = at::empty({m, c.n});
            direct->run(x, a.data_ptr<float>(), c.n);
            built->run(x, b.data_ptr<float>(), c.n);
            EXPECT_TRUE(a.equal(b)) << c.n << "x" << c.k << " g" << c.group << " m" << m;
        }
    }
    // Parts stacked along N (a merged gate/up of bf16 and fp32 parts, 13 + 22 rows: a tile
    // across the seam) give the concatenation's layout.
    const at::Tensor gate = (at::randn({13, 256}) * 0.05).to(at::kBFloat16), up = at::randn({22, 256}) * 0.05;
    const auto parts = Int4Decode::quantize({gate, up}, 64);
    const auto whole = Int4Decode::build(woq::quantize_rtn("t", at::cat({gate.to(at::kFloat), up}), at::Tensor(), 4, 64));
    ASSERT_TRUE(parts && whole);
    const at::Tensor x = at::randn({3, 256});
    at::Tensor a = at::empty({3, 35}), b = at::empty({3, 35});
    parts->run(x, a.data_ptr<float>(), 35);
    whole->run(x, b.data_ptr<float>(), 35);
    EXPECT_TRUE(a.equal(b));
    EXPECT_EQ(Int4Decode::quantize({gate, at::randn({4, 128})}, 64), nullptr);  // widths differ
    at::Tensor w = at::randn({16, 256});
    w[5][7] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(Int4Decode::quantize({w}, 128), nullptr);
    w[5][7] = std::numeric_limits<float>::infinity();
    EXPECT_EQ(Int4Decode::quantize({w}, 128), nullptr);
    EXPECT_EQ(Int4Decode::quantize({at::randn({16, 256}) * 1e-6}, 128), nullptr);  // scales under 2^-14
    EXPECT_EQ(Int4Decode::quantize({at::randn({16, 200})}, 40), nullptr);          // not whole units
    EXPECT_EQ(Int4Decode::quantize({at::randn({16, 256})}, 16), nullptr);          // groups the layout lacks
}

TEST(Int4Decode, RejectsAWrongInputWidth) {
    if (!runnable()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
    const auto d = Int4Decode::build(woq::quantize_rtn("t", at::randn({8, 128}), at::Tensor(), 4, 128));
    ASSERT_NE(d, nullptr);
    std::vector<float> out(9 * 8);
    EXPECT_THROW(d->run(at::randn({9, 256}), out.data(), 8), c10::Error);
}

}  // namespace
}  // namespace ipex::llm
