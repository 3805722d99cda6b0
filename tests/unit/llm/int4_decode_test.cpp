// Int4Decode (the tiled int4 layout, its AVX512-BF16 decode kernel for up to 8 rows and lib/woq's
// large-batch kernel on the same bytes for more) against an fp64 product of the bf16-rounded
// activations with the dequantized weights, over odd output counts (partial tiles and panels),
// group sizes 32/64/128/256/384/per channel, 1-8 rows and batches around the 16-row blocks
// (the tail rows through the decode kernel), fp32 and bf16 inputs. Batches of groups of 32 or
// 64 channels run on weights rounded to bf16, and the reference rounds them too.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "base/isa.h"
#include "llm/int4_decode.h"
#include "llm/kernels.h"
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

void check(const Case &c, uint64_t seed) {
    at::manual_seed(seed);
    const at::Tensor w = at::randn({c.n, c.k}) * 0.05;
    const woq::WoqLayer layer = woq::quantize_rtn("t", w, at::Tensor(), 4, c.group);
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

TEST(Int4Decode, RejectsAWrongInputWidth) {
    if (!runnable()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
    const auto d = Int4Decode::build(woq::quantize_rtn("t", at::randn({8, 128}), at::Tensor(), 4, 128));
    ASSERT_NE(d, nullptr);
    std::vector<float> out(9 * 8);
    EXPECT_THROW(d->run(at::randn({9, 256}), out.data(), 8), c10::Error);
}

}  // namespace
}  // namespace ipex::llm
