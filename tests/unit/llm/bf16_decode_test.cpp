// Bf16Decode (the decode-step bf16 GEMV) against an fp64 product of the bf16-rounded
// activations and weights: odd input and output counts (channel tails, partial row blocks),
// 1-8 activation rows, bias and residual on and off, the fused silu(gate) * up; the weight
// held as parts (q/k/v read apart where a checkpoint stores them) against the same weight
// whole; and Linear's use of it against the oneDNN path the same layer takes for larger steps.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "llm/bf16_decode.h"
#include "llm/kernels.h"
#include "llm/linear.h"
#include "unit/test_cpu.h"

namespace ipex::llm {
namespace {

// fp64 reference of the kernel's math: bf16 inputs, exact products, sums in fp64.
at::Tensor reference(const at::Tensor &x, const at::Tensor &w, const at::Tensor &bias) {
    at::Tensor y = at::matmul(x.to(at::kBFloat16).to(at::kDouble), w.to(at::kDouble).t());
    if (bias.defined()) y = y + bias.to(at::kDouble);
    return y;
}

// The bound of fp32 sums of K products: a few ulps of the sum of their magnitudes.
at::Tensor tolerance(const at::Tensor &x, const at::Tensor &w) {
    return at::matmul(x.to(at::kBFloat16).to(at::kDouble).abs(), w.to(at::kDouble).abs().t()) * 1e-5 + 1e-6;
}

struct Case {
    int64_t n, k, m;
    bool bias, residual, bf16_input;
};

void check(const Case &c, uint64_t seed) {
    at::manual_seed(seed);
    const at::Tensor w = (at::randn({c.n, c.k}) / std::sqrt(static_cast<double>(c.k))).to(at::kBFloat16);
    const at::Tensor bias = c.bias ? at::randn({c.n}) : at::Tensor();
    at::Tensor x = at::randn({c.m, c.k});
    if (c.bf16_input) x = x.to(at::kBFloat16);
    const at::Tensor residual = at::randn({c.m, c.n});
    const Bf16Decode decode(w, bias);
    at::Tensor out = at::full({c.m, c.n + 3}, 7.f);  // a wider row stride: columns past n untouched
    decode.run(x, out.data_ptr<float>(), c.n + 3, c.residual ? residual.data_ptr<float>() : nullptr, c.n);
    at::Tensor ref = reference(x, w, bias);
    if (c.residual) ref = ref + residual.to(at::kDouble);
    const at::Tensor err = (out.narrow(1, 0, c.n).to(at::kDouble) - ref).abs();
    EXPECT_TRUE(err.le(tolerance(x, w)).all().item<bool>())
        << c.n << "x" << c.k << " m" << c.m << " bias " << c.bias << " residual " << c.residual << ": max error "
        << err.max().item<double>();
    EXPECT_TRUE(out.narrow(1, c.n, 3).eq(7.f).all().item<bool>());
}

TEST(Bf16Decode, MatchesTheFp64Product) {
    if (!Bf16Decode::usable()) GTEST_SKIP() << "this CPU has no AVX512-BF16: oneDNN runs every step";
    uint64_t seed = 1;
    for (int64_t m = 1; m <= Bf16Decode::kMaxRows; ++m)
        for (const auto &[n, k] : {std::pair<int64_t, int64_t>{1, 1}, {5, 31}, {17, 33}, {67, 130}, {64, 256}, {129, 257}}) {
            check(Case{n, k, m, m % 2 == 1, false, m % 3 == 0}, seed++);
            check(Case{n, k, m, m % 2 == 0, true, m % 3 == 1}, seed++);
        }
}

TEST(Bf16Decode, SiluMulOfTheGateAndUpHalves) {
    if (!Bf16Decode::usable()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
    uint64_t seed = 100;
    for (int64_t m = 1; m <= Bf16Decode::kMaxRows; ++m)
        for (const auto &[inter, k] : {std::pair<int64_t, int64_t>{3, 33}, {21, 96}, {70, 257}}) {
            at::manual_seed(seed++);
            const at::Tensor w = (at::randn({2 * inter, k}) / std::sqrt(static_cast<double>(k))).to(at::kBFloat16);
            const at::Tensor bias = m % 2 ? at::randn({2 * inter}) : at::Tensor();
            const at::Tensor x = at::randn({m, k});
            at::Tensor out = at::empty({m, inter});
            Bf16Decode(w, bias).run_silu_mul(x, out.data_ptr<float>(), inter);
            const at::Tensor gu = reference(x, w, bias), g = gu.narrow(1, 0, inter), u = gu.narrow(1, inter, inter);
            const at::Tensor ref = g / (1 + at::exp(-g)) * u;
            const double err = (out.to(at::kDouble) - ref).abs().max().item<double>();
            EXPECT_LT(err, 1e-4 * std::max(1.0, ref.abs().max().item<double>())) << inter << "x" << k << " m" << m;
        }
}

// Parts stacked along N give, row for row, what the stacked weight gives (each output is the
// same kernel's dot over the same row): equal to the last bit, also where the gate/up halves
// of silu_mul cross a part's end and where a part has one row.
TEST(Bf16Decode, PartsEqualTheWholeWeight) {
    if (!Bf16Decode::usable()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
    at::manual_seed(11);
    const int64_t k = 97;
    for (const std::vector<int64_t> &rows : {std::vector<int64_t>{64, 16, 16}, {1, 30, 2, 7}, {40, 40}, {33, 47}}) {
        std::vector<at::Tensor> parts;
        for (int64_t n : rows) parts.push_back((at::randn({n, k}) / 10).to(at::kBFloat16));
        const at::Tensor whole = at::cat(parts, 0), bias = at::randn({whole.size(0)});
        const int64_t n = whole.size(0);
        const Bf16Decode one(whole, bias), split(parts, bias);
        EXPECT_EQ(split.out_features(), n);
        for (int64_t m = 1; m <= Bf16Decode::kMaxRows; ++m) {
            const at::Tensor x = at::randn({m, k});
            at::Tensor a = at::empty({m, n}), b = at::empty({m, n});
            one.run(x, a.data_ptr<float>(), n);
            split.run(x, b.data_ptr<float>(), n);
            EXPECT_TRUE(at::equal(a, b)) << "rows " << rows.size() << " parts, m " << m;
            if (n % 2 == 0) {
                at::Tensor ga = at::empty({m, n / 2}), gb = at::empty({m, n / 2});
                one.run_silu_mul(x, ga.data_ptr<float>(), n / 2);
                split.run_silu_mul(x, gb.data_ptr<float>(), n / 2);
                EXPECT_TRUE(at::equal(ga, gb)) << "silu_mul, " << rows.size() << " parts, m " << m;
            }
        }
    }
    const at::Tensor w = at::randn({4, 32}).to(at::kBFloat16);
    EXPECT_THROW(Bf16Decode(std::vector<at::Tensor>{w, w, w, w, w}, at::Tensor()), c10::Error);  // more than 4
    EXPECT_THROW(Bf16Decode(std::vector<at::Tensor>{w, at::randn({4, 31}).to(at::kBFloat16)}, at::Tensor()),
                 c10::Error);  // two K
}

// Jobs run together (a token's chosen experts) give each job's output as run() alone gives it,
// bit for bit: jobs sharing one x tensor, jobs with their own x of another K, a weight in parts,
// biases, fp32 and bf16 inputs, row strides wider than N.
TEST(Bf16Decode, JobsTogetherEqualEachAlone) {
    if (!Bf16Decode::usable()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
    at::manual_seed(12);
    const auto weight = [](int64_t n, int64_t k) { return (at::randn({n, k}) / 10).to(at::kBFloat16); };
    const Bf16Decode a(weight(70, 96), at::randn({70})), b(weight(33, 96), at::Tensor()),
        c(std::vector<at::Tensor>{weight(20, 200), weight(45, 200)}, at::randn({65})), d(weight(129, 96), at::Tensor());
    for (int64_t m : {1, 3, 8}) {
        const at::Tensor x = at::randn({m, 96}), y = at::randn({m, 200}).to(at::kBFloat16), z = at::randn({m, 96});
        const std::vector<std::pair<const Bf16Decode *, at::Tensor>> calls = {{&a, x}, {&b, x}, {&c, y}, {&d, z}, {&a, z}};
        std::vector<at::Tensor> together, alone;
        std::vector<Bf16Decode::Job> jobs;
        for (const auto &[w, in] : calls) {
            const int64_t n = w->out_features();
            together.push_back(at::full({m, n + 5}, 3.f));
            alone.push_back(at::full({m, n + 5}, 3.f));
            jobs.push_back({w, in, together.back().data_ptr<float>(), n + 5});
            w->run(in, alone.back().data_ptr<float>(), n + 5);
        }
        Bf16Decode::decode_jobs(jobs);
        for (size_t i = 0; i < calls.size(); ++i) EXPECT_TRUE(at::equal(together[i], alone[i])) << "job " << i << " m " << m;
    }
}

TEST(Bf16Decode, RejectsTooManyRows) {
    if (!Bf16Decode::usable()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
    const Bf16Decode d(at::randn({8, 64}).to(at::kBFloat16), at::Tensor());
    std::vector<float> out(9 * 8);
    EXPECT_THROW(d.run(at::randn({9, 64}), out.data(), 8), c10::Error);
}

// A step of up to 8 rows through the decode kernel gives what the oneDNN matmul gives the
// same rows inside a larger step (forward, forward_add, forward_glu), and with the
// portable kernels forced the small step takes oneDNN as well. oneDNN's plain product comes
// out rounded to bf16 (the kernel's stays fp32): those compare within bf16's half ulp.
TEST(Bf16Decode, LinearAgreesWithItsOneDnnPath) {
    IPEX_SKIP_WITHOUT_ONEDNN_DTYPE("bf16");
    constexpr double kBf16Out = 1.0 / 128;
    at::manual_seed(7);
    const int64_t k = 200, inter = 48;
    const at::Tensor gate = at::randn({inter, k}) * 0.07, up = at::randn({inter, k}) * 0.07;
    const at::Tensor bias = at::randn({inter});
    WeightFormat format;
    format.dtype = "bf16";
    const Linear lin = Linear::from_dense("gate_up", {gate, up}, {bias, at::Tensor()}, format);
    const at::Tensor x = at::randn({12, k}).to(at::kBFloat16);
    const at::Tensor residual = at::randn({12, 2 * inter});
    const at::Tensor full = lin.forward(x), full_add = lin.forward_add(x, residual);
    at::Tensor full_act = at::empty({12, inter});
    lin.forward_glu(x, full_act);
    for (bool portable : {false, true}) {
        kernels::set_force_portable(portable);
        for (int64_t m : {1, 3, 8}) {
            const at::Tensor xs = x.narrow(0, 0, m);
            EXPECT_TRUE(at::allclose(lin.forward(xs), full.narrow(0, 0, m), kBf16Out, kBf16Out)) << "m " << m;
            EXPECT_TRUE(at::allclose(lin.forward_add(xs, residual.narrow(0, 0, m).contiguous()),
                                     full_add.narrow(0, 0, m), 1e-3, 1e-3))
                << "m " << m;
            at::Tensor act = at::empty({m, inter});
            lin.forward_glu(xs, act);
            EXPECT_TRUE(at::allclose(act, full_act.narrow(0, 0, m), kBf16Out, kBf16Out)) << "m " << m;
        }
    }
    kernels::set_force_portable(false);
}

// WeightFormat::mapped: parts in the math dtype are held apart, not concatenated, and every
// path (decode kernel, oneDNN per part, fused gate/up) gives what the concatenated layer gives;
// parts in another dtype are converted into one weight as before.
TEST(Bf16Decode, LinearHeldInPartsEqualsTheConcatenatedLayer) {
    IPEX_SKIP_WITHOUT_ONEDNN_DTYPE("bf16");
    at::manual_seed(8);
    const int64_t k = 160;
    const std::vector<at::Tensor> parts = {(at::randn({64, k}) * 0.07).to(at::kBFloat16),
                                           (at::randn({16, k}) * 0.07).to(at::kBFloat16),
                                           (at::randn({16, k}) * 0.07).to(at::kBFloat16)};
    const std::vector<at::Tensor> biases = {at::randn({64}), at::Tensor(), at::randn({16})};
    WeightFormat copied, mapped;
    copied.dtype = mapped.dtype = "bf16";
    mapped.mapped = true;
    const Linear whole = Linear::from_dense("qkv", parts, biases, copied);
    const Linear apart = Linear::from_dense("qkv", parts, biases, mapped);
    EXPECT_NE(apart.describe().find("(3 parts)"), std::string::npos) << apart.describe();
    EXPECT_EQ(whole.describe().find("parts"), std::string::npos) << whole.describe();
    EXPECT_EQ(apart.out_features(), 96);
    EXPECT_EQ(apart.weight_bytes(), whole.weight_bytes());
    EXPECT_FALSE(apart.fuses_residual());
    for (int64_t m : {1, 5, 8, 20}) {  // decode steps and a prefill
        const at::Tensor x = at::randn({m, k}).to(at::kBFloat16), residual = at::randn({m, 96});
        // Steps of up to 8 rows run the same kernel; a prefill's oneDNN products come out
        // rounded to bf16, where a product blocked otherwise may round one ulp apart.
        const double tol = m <= Bf16Decode::kMaxRows ? 1e-5 : 1.0 / 128;
        EXPECT_TRUE(at::allclose(apart.forward(x), whole.forward(x), tol, tol)) << "m " << m;
        EXPECT_TRUE(at::allclose(apart.forward_add(x, residual), whole.forward_add(x, residual), std::max(tol, 1e-3),
                                 std::max(tol, 1e-3)))
            << "m " << m;
    }
    // Parts of another dtype: converted into one weight even when mapped.
    const Linear converted = Linear::from_dense("qkv", {parts[0].to(at::kFloat), parts[1].to(at::kFloat)},
                                                {at::Tensor(), at::Tensor()}, mapped);
    EXPECT_EQ(converted.describe().find("parts"), std::string::npos) << converted.describe();
}

}  // namespace
}  // namespace ipex::llm
