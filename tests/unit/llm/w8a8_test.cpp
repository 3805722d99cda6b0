// W8A8Linear (SmoothQuant int8 linear) against an fp64 reference of the same quantized math:
// the weight's per-channel symmetric rounding, the activation's static quantization (1/s and the
// scale), and the int8 product scaled back, equal up to the order of fp32 accumulation.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "llm/w8a8.h"

namespace ipex::llm {
namespace {

struct Case {
    int64_t rows, k, n;
    bool smooth_in_quantize, bias;
};

TEST(W8A8Linear, EqualsTheFp64ReferenceOfTheQuantizedMath) {
    for (const Case c : {Case{1, 64, 48, true, false}, Case{7, 128, 96, false, true}, Case{33, 160, 64, true, true}}) {
        at::manual_seed(c.rows * 1000 + c.k);
        at::Tensor w = at::randn({c.n, c.k}) / std::sqrt(static_cast<double>(c.k));
        w[3].zero_();  // a zero row: scale 1, all q 0
        at::Tensor x = at::randn({c.rows, c.k});
        x.select(1, 5).mul_(40);  // an outlier channel
        const at::Tensor smooth = at::rand({c.k}) + 0.5;
        const at::Tensor bias = c.bias ? at::randn({c.n}) : at::Tensor();
        const double act_scale = (x / smooth).abs().max().item<double>() / 127 * 0.9;  // some clamping
        const W8A8Linear l("t", w * smooth, bias, act_scale,
                           c.smooth_in_quantize ? smooth.reciprocal() : at::Tensor());
        const int wmax = l.weight_max();
        ASSERT_TRUE(wmax == 127 || wmax == 63);

        // weights: q = round(w s / ws), ws = max|w s| / wmax per row
        const at::Tensor ws = (w * smooth).to(at::kDouble).abs().amax(1) / wmax;
        const at::Tensor scales = l.weight_scales().to(at::kDouble);
        EXPECT_TRUE(at::allclose(scales.narrow(0, 0, 3), ws.narrow(0, 0, 3), 1e-6, 0));
        EXPECT_EQ(scales[3].item<double>(), 1.0);
        const at::Tensor qw_ref = at::round((w * smooth).to(at::kDouble) / scales.unsqueeze(1));
        EXPECT_LE((l.qweight().to(at::kDouble) - qw_ref).abs().max().item<double>(), 0.0);

        // activations: q = clamp(round_half_even(x_j * m_j), -127, 127), m_j = 1 / (s_j act_scale)
        const at::Tensor m = l.multiplier();
        const at::Tensor m_ref = c.smooth_in_quantize ? 1.0 / (smooth.to(at::kDouble) * act_scale)
                                                     : at::full({c.k}, 1.0 / act_scale, at::kDouble);
        EXPECT_TRUE(at::allclose(m.to(at::kDouble), m_ref, 1e-6, 0));
        const at::Tensor qx_ref = at::clamp(at::round(x * m), -127, 127);  // fp32 product, as the layer
        const at::Tensor qx = l.quantize_input(x);
        EXPECT_EQ((qx.to(at::kFloat) - qx_ref).abs().max().item<float>(), 0.f);

        // the product in fp64, scaled back
        at::Tensor ref = at::mm(qx_ref.to(at::kDouble), l.qweight().to(at::kDouble).t()) * scales.unsqueeze(0) * act_scale;
        if (c.bias) ref += bias.to(at::kDouble);
        const at::Tensor out = l.forward(x);
        ASSERT_EQ(out.scalar_type(), at::kFloat);
        const double tol = 1e-5 * (ref.abs().max().item<double>() + 1);
        EXPECT_LE((out.to(at::kDouble) - ref).abs().max().item<double>(), tol) << "rows " << c.rows;
        // bf16 activations go through the same quantize step
        EXPECT_EQ(l.forward(x.to(at::kBFloat16)).sizes(), out.sizes());
    }
}

// The quantize step on its edges: ties to even, the clamp at +-127, a NaN to 0, fp32 and bf16
// inputs alike (every value below is a bf16 number).
TEST(W8A8Linear, QuantizeRoundsTiesToEvenAndClamps) {
    const std::vector<float> x{0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 126.5f, 127.5f, 300.f, -300.f, std::nanf(""), 3.75f, -0.25f};
    const std::vector<int> want{0, 2, 2, 0, -2, 126, 127, 127, -127, 0, 4, 0};
    const int64_t k = static_cast<int64_t>(x.size());
    const W8A8Linear l("edges", at::ones({3, k}), at::Tensor(), 1.0, at::Tensor());
    const at::Tensor input = at::tensor(x).reshape({1, k});
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor q = l.quantize_input(input.to(dtype));
        ASSERT_EQ(q.scalar_type(), at::kChar);
        for (int64_t j = 0; j < k; ++j) EXPECT_EQ(q[0][j].item<int>(), want[static_cast<size_t>(j)]) << "x = " << x[j];
    }
}

TEST(InputObserver, RecordsPerChannelMaxima) {
    const at::Tensor w = at::tensor({1.f, -3.f, 2.f, 0.5f, -0.25f, 4.f}).reshape({2, 3});
    InputObserver o("p", w);
    EXPECT_EQ(o.weight_max(), (std::vector<float>{1.f, 3.f, 4.f}));
    o.observe(at::tensor({0.5f, -2.f, 1.f}).reshape({1, 3}));
    o.observe(at::tensor({-1.5f, 1.f, 0.f, 0.f, 0.f, -7.f}).reshape({2, 3}));
    EXPECT_EQ(o.act_max(), (std::vector<float>{1.5f, 2.f, 7.f}));
    EXPECT_EQ(o.rows(), 3);
}

}  // namespace
}  // namespace ipex::llm
