// The large-batch bf16 kernel of ipex::woq_linear (kernels::gemm_bf16_avx512) against an fp64
// product of the bf16-rounded activations and the dequantized weights (exact for int4 in pair
// order, else rounded to bf16 as the kernel documents): what remains is fp32 accumulation
// error, so the bound is tight (any wrong index, group, tail or padding shows). Batches around the 16-row blocks, int4/int8, group sizes 32/64/128/per channel,
// input channels not a multiple of 64 and output channels not a multiple of the panel.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <limits>
#include <string>
#include <vector>

#include "base/isa.h"
#include "checkpoint/woq_format.h"
#include "ops/woq/woq_kernels.h"
#include "unit/woq/woq_test_utils.h"
#include "ops/woq/woq_linear.h"

namespace {

using ipex::woq::WoqLayer;
namespace kernels = ipex::woq::kernels;
namespace isa = ipex::isa;

struct Case {
    int bits;
    int64_t n, k, group_size;
};

const int64_t kBatches[] = {16, 17, 31, 32, 33, 64, 100};

const Case kCases[] = {
    {4, 13, 96, 32},  {4, 50, 160, -1}, {4, 1, 160, 32},   {4, 120, 320, 64}, {4, 61, 384, 128},
    {4, 57, 4128, 32}, {4, 29, 4100, -1}, {8, 13, 96, 32},  {8, 50, 160, -1},  {8, 120, 384, 128},
    {8, 57, 320, 64}, {8, 7, 4100, -1},
    // int4 in pair order (exact weights): per channel, and groups spanning several chunks.
    {4, 50, 192, -1}, {4, 30, 1024, 512}, {4, 59, 4160, -1},
};

std::string describe(const Case &c, int64_t m) {
    return "bits " + std::to_string(c.bits) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " gs " +
           std::to_string(c.group_size) + " m " + std::to_string(m);
}

WoqLayer make(const Case &c, uint64_t seed) {
    at::manual_seed(seed);
    return ipex::woq::quantize_rtn("l", at::randn({c.n, c.k}) * 0.1, at::randn({c.n}), c.bits, c.group_size);
}

using ipex::woq::testing::view_of;

// Largest |got - want| beyond the bound: 1e-5 of sum |x||w| (fp32 accumulation over up to a
// few thousand products) plus `rel` of |want| (rounding of the output itself). <= 0 passes.
double excess(const at::Tensor &got, const at::Tensor &want, const at::Tensor &abs_sum, double rel) {
    const at::Tensor bound = abs_sum * 1e-5 + want.abs() * rel + 1e-7;
    return ((got.to(at::kDouble) - want).abs() - bound).max().item<double>();
}

struct Reference {
    at::Tensor want, abs_sum;  // double [m, n]: x_bf16 w_bf16^T (+ bias), |x| |w|^T
};

// fp32_math: neither x nor the weights rounded to bf16 (fp32_on_this_cpu).
Reference reference(const WoqLayer &l, const at::Tensor &x, bool bias, bool exact_weights, bool fp32_math = false) {
    const at::Tensor xr = (fp32_math ? x : x.to(at::kBFloat16)).to(at::kDouble);
    const at::Tensor wf = ipex::woq::dequantize(l);
    const at::Tensor wr = (exact_weights || fp32_math ? wf : wf.to(at::kBFloat16)).to(at::kDouble);
    Reference r{at::matmul(xr, wr.t()), at::matmul(xr.abs(), wr.abs().t())};
    if (bias) r.want = r.want + l.bias.to(at::kDouble);
    return r;
}

// Whether ipex::woq_linear computes a batch of m rows in fp32 with lowp_mode bf16 or int8: from
// kMatmulRows rows on, a CPU without AVX512-BF16 multiplies dequantized weight blocks with
// oneDNN's matmul, which has no bf16 below AVX-512, so they run in fp32.
bool fp32_on_this_cpu(int64_t m) {
    return m >= ipex::woq::kMatmulRows && !isa::avx512_bf16() &&
           dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_core;
}

// Whether ipex::woq_linear runs the AVX-512 kernel with exact weights for this layer on large
// batches (else the weights are rounded to bf16).
bool exact_on_this_cpu(const WoqLayer &l) {
    return isa::avx512_bf16() && !isa::amx_bf16_present() && kernels::gemm_exact_weights(view_of(l));
}

// x [m, k] as the kernel's input: bf16, padded to [mp, kp], in pair order when exact (within
// every 64 channels, channel blk*32 + q*8 + e at position (q%2)*32 + (q/2)*16 + blk*8 + e),
// then channel pairs transposed to [kp/2, mp]; xsum [groups, mp] the group sums of bf16 x.
struct Packed {
    at::Tensor xp, xsum;
};

Packed pack(const kernels::WeightView &w, const at::Tensor &x, int64_t mp, bool exact) {
    const int64_t m = x.size(0);
    at::Tensor xb = at::constant_pad_nd(x.to(at::kBFloat16), {0, w.kp - w.k, 0, mp - m}, 0);
    Packed p;
    if (exact) {
        p.xsum = xb.narrow(1, 0, w.k).to(at::kFloat).reshape({mp, w.groups, -1}).sum(2).t().contiguous();
        std::vector<int64_t> src(static_cast<size_t>(w.kp));
        for (int64_t c = 0; c < w.kp; ++c) {
            const int64_t base = c / 64 * 64, blk = c % 64 / 32, q = c % 32 / 8, e = c % 8;
            src[static_cast<size_t>(base + (q % 2) * 32 + (q / 2) * 16 + blk * 8 + e)] = c;
        }
        xb = xb.index_select(1, at::tensor(src, at::kLong));
    }
    p.xp = xb.view(at::kInt).t().contiguous();
    return p;
}

}  // namespace

// The kernel itself, called on output-channel ranges that do not start at panel boundaries.
TEST(WoqGemm, KernelMatchesBf16ReferenceForAllBatchesAndTails) {
    if (!isa::avx512_bf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
    for (const Case &c : kCases) {
        const WoqLayer l = make(c, 100 + c.n + c.k);
        const kernels::WeightView w = view_of(l);
        for (const int64_t m : kBatches) {
            const at::Tensor x = at::randn({m, c.k});
            const int64_t mp = kernels::gemm_padded_rows(m);
            ASSERT_EQ(mp % 16, 0);
            ASSERT_GE(mp, m);
            const bool exact = kernels::gemm_exact_weights(w);
            const Packed p = pack(w, x, mp, exact);
            // Poisoned output (NaN) with a wider row stride: every real element must be written,
            // and nothing beyond n.
            const int64_t ldo = c.n + 5;
            at::Tensor out = at::full({m, ldo}, std::numeric_limits<float>::quiet_NaN());
            kernels::GemmBF16 a{reinterpret_cast<const uint32_t *>(p.xp.data_ptr<int32_t>()), m, mp,
                                out.data_ptr<float>(), ldo};
            a.exact = exact;
            a.xsum = exact ? p.xsum.data_ptr<float>() : nullptr;
            const int64_t split = c.n > 3 ? c.n / 3 + 1 : c.n;
            kernels::gemm_bf16_avx512(w, a, 0, split);
            kernels::gemm_bf16_avx512(w, a, split, c.n);
            const Reference r = reference(l, x, false, exact);
            const at::Tensor got = out.narrow(1, 0, c.n);
            ASSERT_FALSE(got.isnan().any().item<bool>()) << describe(c, m);
            EXPECT_TRUE(out.narrow(1, c.n, 5).isnan().all().item<bool>()) << describe(c, m);
            EXPECT_LE(excess(got, r.want, r.abs_sum, 0.0), 0.0) << describe(c, m);
        }
    }
}

// Through the op: fp32 and bf16 activations (output in the input's dtype), bias, leading
// dimensions, lowp modes bf16 and int8 (which computes large batches in bf16 too). Batches 17,
// 33 and 100 of int4 layers in pair order also send their last rows through the gemv kernel.
TEST(WoqGemm, OpLargeBatchesMatchBf16Reference) {
    for (const Case &c : kCases) {
        const WoqLayer l = make(c, 200 + c.n + c.k);
        for (const int64_t m : kBatches) {
            const at::Tensor x = at::randn({m, c.k});
            for (const auto dtype : {at::kFloat, at::kBFloat16}) {
                // The op's input, in its dtype (fp32_on_this_cpu rounds nothing further).
                const Reference r =
                    reference(l, x.to(dtype).to(at::kFloat), true, exact_on_this_cpu(l), fp32_on_this_cpu(m));
                // bf16 output: rounding to 8 bits of mantissa.
                const double rel = dtype == at::kBFloat16 ? 1.0 / 256 : 1e-6;
                for (const char *mode : {"bf16", "int8"}) {
                    const at::Tensor y = ipex::woq::woq_linear(x.to(dtype).view({1, m, c.k}), l.qweight, l.scales,
                                                               l.zeros, l.bias, c10::nullopt, l.bits, l.group_size,
                                                               c.k, mode);
                    ASSERT_EQ(y.scalar_type(), dtype);
                    ASSERT_EQ(y.sizes(), at::IntArrayRef({1, m, c.n}));
                    EXPECT_LE(excess(y[0].to(at::kFloat), r.want, r.abs_sum, rel), 0.0)
                        << describe(c, m) << " " << mode << " " << at::toString(dtype);
                }
            }
        }
    }
}

// Act-order layers gather x by perm before the kernel; the portable path (forced) must agree
// with the AVX-512 one on large batches.
TEST(WoqGemm, ActOrderAndPortablePathAgree) {
    at::manual_seed(31);
    const int64_t n = 70, k = 256, gs = 64, m = 40;
    const WoqLayer base = ipex::woq::quantize_rtn("l", at::randn({n, k}) * 0.1, at::randn({n}), 4, gs);
    const at::Tensor q = ipex::woq::unpack_weight(base.qweight, 4, k);
    const at::Tensor g_idx = at::randperm(k).div(gs, "floor");
    const WoqLayer l = ipex::woq::make_layer("l", q, g_idx, base.scales, base.zeros, base.bias, 4, gs);
    ASSERT_TRUE(l.act_order);
    const at::Tensor x = at::randn({m, k});
    for (const bool portable : {false, true}) {
        const Reference r = reference(l, x, true, !portable && exact_on_this_cpu(l), fp32_on_this_cpu(m));
        ipex::woq::set_force_portable_kernels(portable);
        const at::Tensor y = ipex::woq::woq_linear(x, l.qweight, l.scales, l.zeros, l.bias, l.perm, 4, l.group_size,
                                                   k, "bf16");
        ipex::woq::set_force_portable_kernels(false);
        EXPECT_LE(excess(y, r.want, r.abs_sum, 1e-6), 0.0) << "portable=" << portable;
    }
}

// Batches beyond one pass over a panel (128 rows: LLM prefill), with the last pass partial
// or full, through the kernel and through the op.
TEST(WoqGemm, MultiPassBatchesMatchBf16Reference) {
    const int64_t batches[] = {129, 200, 256, 383, 1024};
    const Case cases[] = {{4, 61, 384, 128}, {4, 50, 192, -1}, {8, 57, 320, 64}, {4, 30, 1024, 512}};
    for (const Case &c : cases) {
        const WoqLayer l = make(c, 300 + c.n + c.k);
        const kernels::WeightView w = view_of(l);
        for (const int64_t m : batches) {
            const at::Tensor x = at::randn({m, c.k});
            if (isa::avx512_bf16()) {
                const int64_t mp = kernels::gemm_padded_rows(m);
                const bool exact = kernels::gemm_exact_weights(w);
                const Packed p = pack(w, x, mp, exact);
                at::Tensor out = at::full({m, c.n}, std::numeric_limits<float>::quiet_NaN());
                kernels::GemmBF16 a{reinterpret_cast<const uint32_t *>(p.xp.data_ptr<int32_t>()), m, mp,
                                    out.data_ptr<float>(), c.n};
                a.exact = exact;
                a.xsum = exact ? p.xsum.data_ptr<float>() : nullptr;
                kernels::gemm_bf16_avx512(w, a, 0, c.n);
                const Reference r = reference(l, x, false, exact);
                ASSERT_FALSE(out.isnan().any().item<bool>()) << describe(c, m);
                EXPECT_LE(excess(out, r.want, r.abs_sum, 0.0), 0.0) << "kernel " << describe(c, m);
            }
            const Reference r = reference(l, x, true, exact_on_this_cpu(l), fp32_on_this_cpu(m));
            const at::Tensor y = ipex::woq::woq_linear(x, l.qweight, l.scales, l.zeros, l.bias, c10::nullopt, l.bits,
                                                       l.group_size, c.k, "bf16");
            EXPECT_LE(excess(y, r.want, r.abs_sum, 1e-6), 0.0) << "op " << describe(c, m);
        }
    }
}
