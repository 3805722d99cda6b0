// Lamb and Lars (lib/train/trust_ratio_steps.cpp) against fp64 references written here from the
// published formulas (Lamb: You et al. 2019, "Large Batch Optimization for Deep Learning", with
// bias correction and the trust ratio ||p|| / ||u||; Lars: You et al. 2017, "Large Batch
// Training of Convolutional Networks", local lr eeta * ||p|| / (||g|| + wd * ||p||), weight decay
// and momentum, in the form IPEX's Lars steps: lr * ratio applied outside the momentum buffer)
// over 200 steps; split bf16 against the fp32 step on the same bf16 gradients (bitwise, after
// every step); the result independent of the thread count; the portable and AVX2 loops bitwise
// equal; the input errors.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/isa.h"
#include "train/step_kernels.h"
#include "train/train_ops.h"

#include "step_count.h"

namespace ipex::train {
namespace {

constexpr int64_t kNumel = 40'011;  // three norm blocks and an odd tail
// fp32 against the fp64 reference: the largest difference over the largest reference value
// after 200 steps. Each step rounds the update, the norms (to the float lr * ratio) and the
// master, so the error grows with the steps; measured ~1e-6 here.
constexpr double kRelTolerance = 2e-5;

std::vector<at::Tensor> gradients(uint64_t seed, int64_t n = kNumel) {
    at::manual_seed(seed);
    std::vector<at::Tensor> grads;
    for (int s = 0; s < kSteps; ++s) grads.push_back(at::randn({n}) * 0.1);
    return grads;
}

double relative_error(const at::Tensor &got, const at::Tensor &want) {
    return (got.to(at::kDouble) - want).abs().max().item<double>() / want.abs().max().item<double>();
}

struct Split {
    at::Tensor top, trail;
    explicit Split(const at::Tensor &master) {
        const auto bits = master.view(at::kInt);
        top = bits.__rshift__(16).to(at::kShort).view(at::kBFloat16).clone();
        trail = bits.bitwise_and(0xffff).to(at::kShort);
    }
    at::Tensor master() const {
        const auto high = top.view(at::kShort).to(at::kInt).__lshift__(16);
        return high.bitwise_or(trail.to(at::kInt).bitwise_and(0xffff)).view(at::kFloat);
    }
};

bool same_bits(const at::Tensor &a, const at::Tensor &b) { return at::equal(a.view(at::kInt), b.view(at::kInt)); }

// ---- Lamb ----

struct LambCase {
    double lr, beta1, beta2, eps, weight_decay;
};

const std::vector<LambCase> kLambCases = {
    {1e-3, 0.9, 0.999, 1e-8, 0.0},
    {1e-2, 0.9, 0.999, 1e-6, 1e-2},
    {5e-3, 0.8, 0.99, 1e-8, 0.1},
};

std::string describe(const LambCase &c) {
    return "lr=" + std::to_string(c.lr) + " betas=" + std::to_string(c.beta1) + "," + std::to_string(c.beta2) +
           " eps=" + std::to_string(c.eps) + " weight_decay=" + std::to_string(c.weight_decay);
}

// The published Lamb step in fp64.
struct LambReference {
    at::Tensor p, m, v;
    explicit LambReference(const at::Tensor &p0)
        : p(p0.to(at::kDouble)), m(at::zeros_like(p)), v(at::zeros_like(p)) {}
    void step(const LambCase &c, const at::Tensor &grad, int64_t t) {
        const auto g = grad.to(at::kDouble);
        m = c.beta1 * m + (1 - c.beta1) * g;
        v = c.beta2 * v + (1 - c.beta2) * g * g;
        const auto m_hat = m / (1 - std::pow(c.beta1, t));
        const auto v_hat = v / (1 - std::pow(c.beta2, t));
        const auto u = m_hat / (v_hat.sqrt() + c.eps) + c.weight_decay * p;
        const double w_norm = p.norm().item<double>(), u_norm = u.norm().item<double>();
        const double ratio = w_norm > 0 && u_norm > 0 ? w_norm / u_norm : 1.0;
        p = p - c.lr * ratio * u;
    }
};

struct LambState {
    at::Tensor m = at::zeros({kNumel}), v = at::zeros({kNumel});
    void step(const LambCase &c, at::Tensor param, const at::Tensor &grad, const c10::optional<at::Tensor> &trail,
              int64_t t) {
        lamb_step(param, grad, m, v, trail, t, c.lr, c.beta1, c.beta2, c.eps, c.weight_decay);
    }
};

TEST(LambStep, MatchesTheFp64FormulaOver200Steps) {
    for (const LambCase &c : kLambCases) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(31);
        auto fused = at::randn({kNumel});
        const auto initial = fused.clone();
        LambReference reference(fused);
        LambState state;
        const auto grads = gradients(32);
        for (int s = 0; s < kSteps; ++s) {
            reference.step(c, grads[s], s + 1);
            state.step(c, fused, grads[s], c10::nullopt, s + 1);
            ASSERT_LE(relative_error(fused, reference.p), kRelTolerance) << "step " << s;
        }
        EXPECT_GT(relative_error(initial, reference.p), 100 * kRelTolerance);  // the parameters moved
    }
}

TEST(LambStep, SplitBf16EqualsFp32StepExactly) {
    for (const LambCase &c : kLambCases) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(33);
        auto master = at::randn({kNumel});
        Split split(master);
        LambState state, split_state;
        const auto grads = gradients(34);
        for (int s = 0; s < kSteps; ++s) {
            const auto grad = grads[s].to(at::kBFloat16);
            state.step(c, master, grad.to(at::kFloat), c10::nullopt, s + 1);
            split_state.step(c, split.top, grad, split.trail, s + 1);
            ASSERT_TRUE(same_bits(split.master(), master)) << "step " << s;
        }
        EXPECT_TRUE(same_bits(split_state.v, state.v));
    }
}

TEST(LambStep, ZeroWeightsTakeTrustRatioOne) {
    // ||p|| = 0: the ratio is 1, so the first step is p = -lr * u with u = m_hat / (sqrt(v_hat) + eps).
    auto p = at::zeros({kNumel});
    auto m = at::zeros({kNumel}), v = at::zeros({kNumel});
    const auto g = at::randn({kNumel});
    lamb_step(p, g, m, v, c10::nullopt, 1, 0.1, 0.9, 0.999, 1e-8, 0.0);
    const auto expected = -0.1 * g.to(at::kDouble) / (g.to(at::kDouble).abs() + 1e-8);
    EXPECT_LE((p.to(at::kDouble) - expected).abs().max().item<double>(), 1e-6);
}

// ---- Lars ----

struct LarsCase {
    double lr, momentum, eeta, eps, weight_decay;
};

const std::vector<LarsCase> kLarsCases = {
    {0.1, 0.0, 1e-3, 0.0, 0.0},
    {0.5, 0.9, 1e-3, 1e-8, 5e-4},
    {1.0, 0.9, 2e-2, 0.0, 1e-2},
};

std::string describe(const LarsCase &c) {
    return "lr=" + std::to_string(c.lr) + " momentum=" + std::to_string(c.momentum) + " eeta=" + std::to_string(c.eeta) +
           " eps=" + std::to_string(c.eps) + " weight_decay=" + std::to_string(c.weight_decay);
}

// The published Lars step in fp64 (lr * local lr applied to the momentum buffer, as IPEX does;
// with momentum 0 this is the paper's update w -= lr * local_lr * (g + wd * w) exactly).
struct LarsReference {
    at::Tensor p, buf;
    explicit LarsReference(const at::Tensor &p0) : p(p0.to(at::kDouble)) {}
    void step(const LarsCase &c, const at::Tensor &grad) {
        const auto g = grad.to(at::kDouble);
        const double w_norm = p.norm().item<double>(), g_norm = g.norm().item<double>();
        const double local_lr =
            w_norm > 0 && g_norm > 0 ? c.eeta * w_norm / (g_norm + c.weight_decay * w_norm + c.eps) : 1.0;
        auto d = g + c.weight_decay * p;
        if (c.momentum != 0) {
            buf = buf.defined() ? c.momentum * buf + d : d;
            d = buf;
        }
        p = p - c.lr * local_lr * d;
    }
};

TEST(LarsStep, MatchesTheFp64FormulaOver200Steps) {
    for (const LarsCase &c : kLarsCases) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(41);
        auto fused = at::randn({kNumel});
        LarsReference reference(fused);
        auto buf = at::empty({kNumel});
        const auto grads = gradients(42);
        for (int s = 0; s < kSteps; ++s) {
            reference.step(c, grads[s]);
            lars_step(fused, grads[s], buf, c10::nullopt, c.lr, c.momentum, c.eeta, c.eps, c.weight_decay, s == 0);
            ASSERT_LE(relative_error(fused, reference.p), kRelTolerance) << "step " << s;
        }
    }
}

TEST(LarsStep, SplitBf16EqualsFp32StepExactly) {
    for (const LarsCase &c : kLarsCases) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(43);
        auto master = at::randn({kNumel});
        Split split(master);
        auto buf = at::empty({kNumel}), split_buf = at::empty({kNumel});
        const auto grads = gradients(44);
        for (int s = 0; s < kSteps; ++s) {
            const auto grad = grads[s].to(at::kBFloat16);
            lars_step(master, grad.to(at::kFloat), buf, c10::nullopt, c.lr, c.momentum, c.eeta, c.eps, c.weight_decay,
                      s == 0);
            lars_step(split.top, grad, split_buf, split.trail, c.lr, c.momentum, c.eeta, c.eps, c.weight_decay, s == 0);
            ASSERT_TRUE(same_bits(split.master(), master)) << "step " << s;
        }
    }
}

TEST(LarsStep, ZeroGradientTakesTrustRatioOne) {
    // ||g|| = 0 with weight decay: ratio 1, p -= lr * wd * p.
    auto p = at::randn({100});
    const auto expected = p - 0.5f * (0.1f * p);
    lars_step(p, at::zeros({100}), c10::nullopt, c10::nullopt, 0.5, 0.0, 1e-3, 0.0, 0.1, true);
    EXPECT_LE((p - expected).abs().max().item<float>(), 1e-6f);
}

// ---- both ----

TEST(TrustRatioSteps, SameBitsForAnyThreadCount) {
    const int threads = at::get_num_threads();
    const auto grads = gradients(51);
    std::vector<at::Tensor> results;
    for (int n : {1, 2, 3}) {
        at::set_num_threads(n);
        at::manual_seed(52);
        auto lamb_p = at::randn({kNumel});
        auto lars_p = lamb_p.clone();
        LambState state;
        auto buf = at::empty({kNumel});
        for (int s = 0; s < 20; ++s) {
            state.step(kLambCases[1], lamb_p, grads[s], c10::nullopt, s + 1);
            lars_step(lars_p, grads[s], buf, c10::nullopt, 0.5, 0.9, 1e-3, 1e-8, 5e-4, s == 0);
        }
        results.push_back(at::cat({lamb_p, lars_p}));
    }
    at::set_num_threads(threads);
    EXPECT_TRUE(same_bits(results[0], results[1]));
    EXPECT_TRUE(same_bits(results[0], results[2]));
}

TEST(TrustRatioSteps, VersionCountersAreBumped) {
    auto p = at::randn({10});
    auto m = at::zeros({10}), v = at::zeros({10}), buf = at::zeros({10});
    const auto g = at::randn({10});
    const auto p0 = p._version(), m0 = m._version(), buf0 = buf._version();
    lamb_step(p, g, m, v, c10::nullopt, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0);
    EXPECT_EQ(p._version(), p0 + 1);
    EXPECT_EQ(m._version(), m0 + 1);
    lars_step(p, g, buf, c10::nullopt, 0.1, 0.9, 1e-3, 0.0, 0.0, true);
    EXPECT_EQ(p._version(), p0 + 2);
    EXPECT_EQ(buf._version(), buf0 + 1);
}

TEST(TrustRatioSteps, PortableAndAvx2LoopsAgreeBitwise) {
    if (!isa::avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
    constexpr int64_t kN = 1037;
    for (bool split : {false, true})
        for (bool bf16_grad : {false, true}) {
            SCOPED_TRACE("split=" + std::to_string(split) + " bf16_grad=" + std::to_string(bf16_grad));
            std::vector<at::Tensor> outputs[2];
            SquareSums sums[2][2];
            for (int build = 0; build < 2; ++build) {
                at::manual_seed(60);
                auto master = at::randn({kN});
                Split halves(master);
                auto grad = at::randn({kN}) * 0.1;
                auto grad_bf16 = grad.to(at::kBFloat16);
                auto m = at::randn({kN}) * 0.01, v = at::rand({kN}) * 0.01;
                LambArgs a;
                if (split) {
                    a.io.top = reinterpret_cast<uint16_t *>(halves.top.data_ptr<at::BFloat16>());
                    a.io.trail = reinterpret_cast<uint16_t *>(halves.trail.data_ptr<int16_t>());
                } else {
                    a.io.master = master.data_ptr<float>();
                }
                if (bf16_grad) {
                    a.io.grad_bf16 = grad_bf16.data_ptr<at::BFloat16>();
                } else {
                    a.io.grad = grad.data_ptr<float>();
                }
                a.exp_avg = m.data_ptr<float>();
                a.exp_avg_sq = v.data_ptr<float>();
                a.has_decay = true;
                a.beta1 = 0.9f, a.one_minus_beta1 = 0.1f, a.beta2 = 0.999f, a.one_minus_beta2 = 0.001f;
                a.bias_correction1 = 0.19f, a.bias_correction2 = 0.002f, a.eps = 1e-8f, a.decay = 1e-2f;
                a.neg_rate = -1e-3f;
                const bool portable = build == 0;
                sums[build][0] = (portable ? ref::norms_range : avx2::norms_range)(a.io, 0, kN);
                sums[build][1] = (portable ? ref::lamb_moments_range : avx2::lamb_moments_range)(a, 0, kN);
                (portable ? ref::lamb_update_range : avx2::lamb_update_range)(a, 0, kN);
                outputs[build] = {master.view(at::kInt), halves.top.view(at::kShort), halves.trail,
                                  m.view(at::kInt), v.view(at::kInt)};
            }
            for (int k = 0; k < 2; ++k) {
                EXPECT_EQ(sums[0][k].first, sums[1][k].first);
                EXPECT_EQ(sums[0][k].second, sums[1][k].second);
            }
            for (size_t t = 0; t < outputs[0].size(); ++t) EXPECT_TRUE(at::equal(outputs[0][t], outputs[1][t])) << t;
        }
}

std::string error_of(const std::function<void()> &fn) {
    try {
        fn();
    } catch (const c10::Error &e) {
        return e.what();
    }
    return "";
}

TEST(TrustRatioSteps, BadInputsAreClearErrors) {
    const auto p = at::randn({8});
    const auto g = at::randn({8});
    auto m = at::zeros({8}), v = at::zeros({8});
    auto has = [](const std::string &message, const char *part) { return message.find(part) != std::string::npos; };
    EXPECT_TRUE(has(error_of([&] { lamb_step(p.clone(), g, at::zeros({7}), v, c10::nullopt, 1, 1e-3, 0.9, 0.999, 1e-8, 0); }),
                    "exp_avg has shape"));
    EXPECT_TRUE(has(error_of([&] { lamb_step(p.clone(), g, m, v.to(at::kDouble), c10::nullopt, 1, 1e-3, 0.9, 0.999, 1e-8, 0); }),
                    "exp_avg_sq must be float32"));
    EXPECT_TRUE(has(error_of([&] { lamb_step(p.clone(), g, m, v, c10::nullopt, 0, 1e-3, 0.9, 0.999, 1e-8, 0); }),
                    "step counts from 1"));
    EXPECT_TRUE(has(error_of([&] { lamb_step(p.clone(), g, m, v, c10::nullopt, 1, 1e-3, 1.0, 0.999, 1e-8, 0); }),
                    "beta1 must be in [0, 1)"));
    EXPECT_TRUE(has(error_of([&] {
                        lamb_step(p.to(at::kBFloat16), g, m, v, at::zeros({8}, at::kInt), 1, 1e-3, 0.9, 0.999, 1e-8, 0);
                    }),
                    "the trail must be int16"));
    EXPECT_TRUE(has(error_of([&] {
                        lamb_step(p.clone(), at::randn({16}).slice(0, 0, 16, 2), m, v, c10::nullopt, 1, 1e-3, 0.9,
                                  0.999, 1e-8, 0);
                    }),
                    "the gradient must be contiguous"));
    EXPECT_TRUE(has(error_of([&] { lars_step(p.clone(), g, c10::nullopt, c10::nullopt, 0.1, 0.9, 1e-3, 0, 0, true); }),
                    "needs momentum_buf"));
    EXPECT_TRUE(has(error_of([&] { lars_step(p.clone(), g, c10::nullopt, c10::nullopt, 0.1, 0, 0.0, 0, 0, true); }),
                    "eeta (the trust coefficient) must be > 0"));
    EXPECT_TRUE(has(error_of([&] {
                        lars_step(p.clone(), g.to(at::kDouble), c10::nullopt, c10::nullopt, 0.1, 0, 1e-3, 0, 0, true);
                    }),
                    "the gradient must be float32 or bfloat16"));
}

}  // namespace
}  // namespace ipex::train
