// The fused optimizer steps (lib/train) against libtorch's torch::optim::SGD, Adagrad, Adam, AdamW on
// the same gradients over 200 steps, for each option combination (elementwise within 1 ulp:
// the steps follow aten's order of operations and its fused multiply-adds); split bf16 against
// the fp32 step on the same bf16-valued gradients after every step (bitwise); maximize against
// the negated gradient; the portable and AVX2 builds of the loops against each other (bitwise);
// and the input errors.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/isa.h"
#include "train/step_kernels.h"
#include "train/train_ops.h"

#include "step_count.h"

namespace ipex::train {
namespace {

constexpr int64_t kNumel = 20'011;  // two parallel chunks and an odd tail
constexpr int64_t kMaxUlp = 1;  // the acceptance bound; Debian's libtorch 1.13 gives 0 here

// The distance in representable floats between a and b (0 when equal, both NaN counts as equal).
int64_t ulp_distance(float a, float b) {
    if (std::isnan(a) && std::isnan(b)) return 0;
    int32_t ia, ib;
    std::memcpy(&ia, &a, sizeof(ia));
    std::memcpy(&ib, &b, sizeof(ib));
    const int64_t oa = ia < 0 ? static_cast<int64_t>(INT32_MIN) - ia : ia;
    const int64_t ob = ib < 0 ? static_cast<int64_t>(INT32_MIN) - ib : ib;
    return std::llabs(oa - ob);
}

int64_t max_ulp(const at::Tensor &got, const at::Tensor &want) {
    const auto g = got.contiguous();
    const auto w = want.contiguous();
    const float *gp = g.data_ptr<float>();
    const float *wp = w.data_ptr<float>();
    int64_t worst = 0;
    for (int64_t i = 0; i < g.numel(); ++i) worst = std::max(worst, ulp_distance(gp[i], wp[i]));
    return worst;
}

// The gradients of one run: seeded, of a scale that moves the parameters.
std::vector<at::Tensor> gradients(uint64_t seed) {
    at::manual_seed(seed);
    std::vector<at::Tensor> grads;
    for (int s = 0; s < kSteps; ++s) grads.push_back(at::randn({kNumel}) * 0.1);
    return grads;
}

// The fp32 master weights and a split copy of them: top (bf16) and trail (int16).
struct Split {
    at::Tensor top, trail;
    explicit Split(const at::Tensor &master) {
        const auto bits = master.view(at::kInt);
        top = bits.__rshift__(16).to(at::kShort).view(at::kBFloat16).clone();
        trail = bits.bitwise_and(0xffff).to(at::kShort);
    }
    at::Tensor master() const {
        const auto high = top.view(at::kShort).to(at::kInt).__lshift__(16);
        const auto low = trail.to(at::kInt).bitwise_and(0xffff);
        return high.bitwise_or(low).view(at::kFloat);
    }
};

struct SgdCase {
    double momentum, dampening, weight_decay;
    bool nesterov;
};

std::vector<SgdCase> sgd_cases() {
    std::vector<SgdCase> cases;
    for (double momentum : {0.0, 0.9})
        for (double dampening : {0.0, 0.1})
            for (double weight_decay : {0.0, 1e-2})
                for (bool nesterov : {false, true}) {
                    if (nesterov && (momentum == 0 || dampening != 0)) continue;  // torch refuses it
                    if (momentum == 0 && dampening != 0) continue;                 // dampening unused
                    cases.push_back({momentum, dampening, weight_decay, nesterov});
                }
    return cases;
}

std::string describe(const SgdCase &c) {
    return "momentum=" + std::to_string(c.momentum) + " dampening=" + std::to_string(c.dampening) +
           " weight_decay=" + std::to_string(c.weight_decay) + " nesterov=" + std::to_string(c.nesterov);
}

constexpr double kLr = 0.05;

TEST(SgdStep, EqualsTorchOptimOver200Steps) {
    for (const SgdCase &c : sgd_cases()) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(1);
        auto reference = torch::randn({kNumel}).requires_grad_(true);
        auto fused = reference.detach().clone();
        auto buf = at::empty({kNumel});
        torch::optim::SGD optimizer({reference}, torch::optim::SGDOptions(kLr)
                                                     .momentum(c.momentum)
                                                     .dampening(c.dampening)
                                                     .weight_decay(c.weight_decay)
                                                     .nesterov(c.nesterov));
        const auto grads = gradients(2);
        for (int s = 0; s < kSteps; ++s) {
            reference.mutable_grad() = grads[s].clone();
            optimizer.step();
            sgd_step(fused, grads[s], buf, c10::nullopt, kLr, c.momentum, c.dampening, c.weight_decay, c.nesterov,
                     false, s == 0);
            ASSERT_LE(max_ulp(fused, reference.detach()), kMaxUlp) << "step " << s;
        }
    }
}

TEST(SgdStep, SplitBf16EqualsFp32StepExactly) {
    for (const SgdCase &c : sgd_cases()) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(3);
        auto master = at::randn({kNumel});
        Split split(master);
        auto buf = at::empty({kNumel});
        auto split_buf = at::empty({kNumel});
        const auto grads = gradients(4);
        for (int s = 0; s < kSteps; ++s) {
            const auto grad = grads[s].to(at::kBFloat16);
            sgd_step(master, grad.to(at::kFloat), buf, c10::nullopt, kLr, c.momentum, c.dampening, c.weight_decay,
                     c.nesterov, false, s == 0);
            sgd_step(split.top, grad, split_buf, split.trail, kLr, c.momentum, c.dampening, c.weight_decay,
                     c.nesterov, false, s == 0);
            ASSERT_TRUE(at::equal(split.master().view(at::kInt), master.view(at::kInt))) << "step " << s;
            if (c.momentum != 0) ASSERT_TRUE(at::equal(split_buf, buf)) << "step " << s;
        }
    }
}

TEST(SgdStep, MaximizeIsTheNegatedGradient) {
    at::manual_seed(5);
    auto a = at::randn({kNumel});
    auto b = a.clone();
    auto buf_a = at::empty({kNumel});
    auto buf_b = at::empty({kNumel});
    const auto grads = gradients(6);
    for (int s = 0; s < 20; ++s) {
        sgd_step(a, grads[s], buf_a, c10::nullopt, kLr, 0.9, 0.0, 1e-2, true, true, s == 0);
        sgd_step(b, -grads[s], buf_b, c10::nullopt, kLr, 0.9, 0.0, 1e-2, true, false, s == 0);
    }
    EXPECT_TRUE(at::equal(a, b));
}

struct AdagradCase {
    double lr_decay, weight_decay, initial_accumulator_value;
};

std::vector<AdagradCase> adagrad_cases() {
    std::vector<AdagradCase> cases;
    for (double lr_decay : {0.0, 1e-3})
        for (double weight_decay : {0.0, 1e-2})
            for (double initial : {0.0, 0.1}) cases.push_back({lr_decay, weight_decay, initial});
    return cases;
}

std::string describe(const AdagradCase &c) {
    return "lr_decay=" + std::to_string(c.lr_decay) + " weight_decay=" + std::to_string(c.weight_decay) +
           " initial_accumulator_value=" + std::to_string(c.initial_accumulator_value);
}

constexpr double kAdagradLr = 1e-2, kAdagradEps = 1e-10;

TEST(AdagradStep, EqualsTorchOptimOver200Steps) {
    for (const AdagradCase &c : adagrad_cases()) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(13);
        auto reference = torch::randn({kNumel}).requires_grad_(true);
        auto fused = reference.detach().clone();
        auto sum = at::full({kNumel}, c.initial_accumulator_value);
        torch::optim::Adagrad optimizer({reference}, torch::optim::AdagradOptions(kAdagradLr)
                                                         .lr_decay(c.lr_decay)
                                                         .weight_decay(c.weight_decay)
                                                         .initial_accumulator_value(c.initial_accumulator_value)
                                                         .eps(kAdagradEps));
        const auto grads = gradients(14);
        for (int s = 0; s < kSteps; ++s) {
            reference.mutable_grad() = grads[s].clone();
            optimizer.step();
            adagrad_step(fused, grads[s], sum, c10::nullopt, s + 1, kAdagradLr, c.lr_decay, c.weight_decay,
                         kAdagradEps, false);
            ASSERT_LE(max_ulp(fused, reference.detach()), kMaxUlp) << "step " << s;
        }
    }
}

TEST(AdagradStep, SplitBf16EqualsFp32StepExactly) {
    for (const AdagradCase &c : adagrad_cases()) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(15);
        auto master = at::randn({kNumel});
        Split split(master);
        auto sum = at::full({kNumel}, c.initial_accumulator_value);
        auto split_sum = sum.clone();
        const auto grads = gradients(16);
        for (int s = 0; s < kSteps; ++s) {
            const auto grad = grads[s].to(at::kBFloat16);
            adagrad_step(master, grad.to(at::kFloat), sum, c10::nullopt, s + 1, kAdagradLr, c.lr_decay,
                         c.weight_decay, kAdagradEps, false);
            adagrad_step(split.top, grad, split_sum, split.trail, s + 1, kAdagradLr, c.lr_decay, c.weight_decay,
                         kAdagradEps, false);
            ASSERT_TRUE(at::equal(split.master().view(at::kInt), master.view(at::kInt))) << "step " << s;
        }
    }
}

TEST(AdagradStep, MaximizeIsTheNegatedGradient) {
    at::manual_seed(17);
    auto a = at::randn({kNumel});
    auto b = a.clone();
    auto sum_a = at::zeros({kNumel});
    auto sum_b = at::zeros({kNumel});
    const auto grads = gradients(18);
    for (int s = 0; s < 20; ++s) {
        adagrad_step(a, grads[s], sum_a, c10::nullopt, s + 1, kAdagradLr, 1e-3, 1e-2, kAdagradEps, true);
        adagrad_step(b, -grads[s], sum_b, c10::nullopt, s + 1, kAdagradLr, 1e-3, 1e-2, kAdagradEps, false);
    }
    EXPECT_TRUE(at::equal(a, b));
}

struct AdamCase {
    bool decoupled, amsgrad;
    double weight_decay;
};

std::vector<AdamCase> adam_cases() {
    std::vector<AdamCase> cases;
    for (bool decoupled : {false, true})
        for (bool amsgrad : {false, true})
            for (double weight_decay : {0.0, 1e-2}) cases.push_back({decoupled, amsgrad, weight_decay});
    return cases;
}

std::string describe(const AdamCase &c) {
    return std::string(c.decoupled ? "AdamW" : "Adam") + " amsgrad=" + std::to_string(c.amsgrad) +
           " weight_decay=" + std::to_string(c.weight_decay);
}

constexpr double kAdamLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

// One Adam-family step of the fused ops.
struct AdamState {
    at::Tensor exp_avg = at::zeros({kNumel}), exp_avg_sq = at::zeros({kNumel}), max_sq = at::zeros({kNumel});
    void step(const AdamCase &c, at::Tensor param, const at::Tensor &grad, const c10::optional<at::Tensor> &trail,
              int64_t step, bool maximize = false) {
        const auto fn = c.decoupled ? adamw_step : adam_step;
        fn(param, grad, exp_avg, exp_avg_sq, c.amsgrad ? c10::optional<at::Tensor>(max_sq) : c10::nullopt, trail,
           step, kAdamLr, kBeta1, kBeta2, kEps, c.weight_decay, c.amsgrad, maximize);
    }
};

TEST(AdamStep, EqualsTorchOptimOver200Steps) {
    for (const AdamCase &c : adam_cases()) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(7);
        auto reference = torch::randn({kNumel}).requires_grad_(true);
        auto fused = reference.detach().clone();
        std::unique_ptr<torch::optim::Optimizer> optimizer;
        if (c.decoupled) {
            optimizer = std::make_unique<torch::optim::AdamW>(
                std::vector<at::Tensor>{reference}, torch::optim::AdamWOptions(kAdamLr)
                                                        .betas({kBeta1, kBeta2})
                                                        .eps(kEps)
                                                        .weight_decay(c.weight_decay)
                                                        .amsgrad(c.amsgrad));
        } else {
            optimizer = std::make_unique<torch::optim::Adam>(
                std::vector<at::Tensor>{reference}, torch::optim::AdamOptions(kAdamLr)
                                                        .betas({kBeta1, kBeta2})
                                                        .eps(kEps)
                                                        .weight_decay(c.weight_decay)
                                                        .amsgrad(c.amsgrad));
        }
        AdamState state;
        const auto grads = gradients(8);
        for (int s = 0; s < kSteps; ++s) {
            reference.mutable_grad() = grads[s].clone();
            optimizer->step();
            state.step(c, fused, grads[s], c10::nullopt, s + 1);
            ASSERT_LE(max_ulp(fused, reference.detach()), kMaxUlp) << "step " << s;
        }
    }
}

TEST(AdamStep, SplitBf16EqualsFp32StepExactly) {
    for (const AdamCase &c : adam_cases()) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(9);
        auto master = at::randn({kNumel});
        Split split(master);
        AdamState state, split_state;
        const auto grads = gradients(10);
        for (int s = 0; s < kSteps; ++s) {
            const auto grad = grads[s].to(at::kBFloat16);
            state.step(c, master, grad.to(at::kFloat), c10::nullopt, s + 1);
            split_state.step(c, split.top, grad, split.trail, s + 1);
            ASSERT_TRUE(at::equal(split.master().view(at::kInt), master.view(at::kInt))) << "step " << s;
        }
        EXPECT_TRUE(at::equal(split_state.exp_avg_sq, state.exp_avg_sq));
    }
}

TEST(AdamStep, MaximizeIsTheNegatedGradient) {
    for (const AdamCase &c : adam_cases()) {
        SCOPED_TRACE(describe(c));
        at::manual_seed(11);
        auto a = at::randn({kNumel});
        auto b = a.clone();
        AdamState sa, sb;
        const auto grads = gradients(12);
        for (int s = 0; s < 20; ++s) {
            sa.step(c, a, grads[s], c10::nullopt, s + 1, true);
            sb.step(c, b, -grads[s], c10::nullopt, s + 1, false);
        }
        EXPECT_TRUE(at::equal(a, b));
    }
}

// Random buffers for one loop call of every kind: fp32 or split master, fp32 or bf16 gradient.
struct LoopData {
    at::Tensor master, top, trail, grad, grad_bf16, s1, s2, s3;
    LoopData(uint64_t seed, int64_t n) {
        at::manual_seed(seed);
        master = at::randn({n});
        Split split(master);
        top = split.top;
        trail = split.trail;
        grad = at::randn({n}) * 0.1;
        grad_bf16 = grad.to(at::kBFloat16);
        s1 = at::randn({n}) * 0.01;
        s2 = at::rand({n}) * 0.01;
        s3 = at::rand({n}) * 0.01;
    }
    StepBuffers io(bool split, bool bf16_grad) {
        StepBuffers b;
        if (split) {
            b.top = reinterpret_cast<uint16_t *>(top.data_ptr<at::BFloat16>());
            b.trail = reinterpret_cast<uint16_t *>(trail.data_ptr<int16_t>());
        } else {
            b.master = master.data_ptr<float>();
        }
        if (bf16_grad) {
            b.grad_bf16 = grad_bf16.data_ptr<at::BFloat16>();
        } else {
            b.grad = grad.data_ptr<float>();
        }
        return b;
    }
    std::vector<at::Tensor> outputs() const { return {master, top.view(at::kShort), trail, s1, s2, s3}; }
};

TEST(StepKernels, PortableAndAvx2BuildsAgreeBitwise) {
    if (!isa::avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
    constexpr int64_t kN = 1037;
    int calls = 0;
    for (bool split : {false, true})
        for (bool bf16_grad : {false, true})
            for (int variant = 0; variant < 4; ++variant) {
                SCOPED_TRACE("split=" + std::to_string(split) + " bf16_grad=" + std::to_string(bf16_grad) +
                             " variant=" + std::to_string(variant));
                const bool flag = variant & 1, decay = variant & 2;
                LoopData ref_data(20 + variant, kN), avx2_data(20 + variant, kN);
                auto both = [&](auto &&call) {
                    call(ref_data, true);
                    call(avx2_data, false);
                    const auto got = avx2_data.outputs(), want = ref_data.outputs();
                    const auto bits = [](const at::Tensor &t) { return t.scalar_type() == at::kFloat ? t.view(at::kInt) : t; };
                    for (size_t t = 0; t < got.size(); ++t)
                        ASSERT_TRUE(at::equal(bits(got[t]), bits(want[t]))) << "output " << t;
                    ++calls;
                };
                both([&](LoopData &d, bool portable) {
                    SgdArgs a;
                    a.io = d.io(split, bf16_grad);
                    a.momentum_buf = d.s1.data_ptr<float>();
                    a.has_decay = decay;
                    a.decay = 1e-2f;
                    a.momentum = 0.9f;
                    a.one_minus_dampening = 0.9f;
                    a.neg_lr = -0.05f;
                    a.nesterov = flag;
                    a.maximize = flag;
                    (portable ? ref::sgd_range : avx2::sgd_range)(a, 0, kN);
                });
                both([&](LoopData &d, bool portable) {
                    AdagradArgs a;
                    a.io = d.io(split, bf16_grad);
                    a.sum = d.s2.data_ptr<float>();
                    a.has_decay = decay;
                    a.decay = 1e-2f;
                    a.eps = 1e-10f;
                    a.neg_clr = -0.01f;
                    a.maximize = flag;
                    (portable ? ref::adagrad_range : avx2::adagrad_range)(a, 0, kN);
                });
                both([&](LoopData &d, bool portable) {
                    AdamArgs a;
                    a.io = d.io(split, bf16_grad);
                    a.exp_avg = d.s1.data_ptr<float>();
                    a.exp_avg_sq = d.s2.data_ptr<float>();
                    a.max_exp_avg_sq = flag ? d.s3.data_ptr<float>() : nullptr;
                    a.decoupled = flag;
                    a.has_decay = decay;
                    a.decay = 0.999f;
                    a.l2 = 1e-2f;
                    a.beta1 = 0.9f;
                    a.one_minus_beta1 = 0.1f;
                    a.beta2 = 0.999f;
                    a.one_minus_beta2 = 0.001f;
                    a.bias_correction2_sqrt = 0.1f;
                    a.eps = 1e-8f;
                    a.neg_step_size = -1e-3f;
                    a.maximize = flag;
                    (portable ? ref::adam_range : avx2::adam_range)(a, 0, kN);
                });
            }
    EXPECT_EQ(calls, 2 * 2 * 4 * 3);
}

// The message of the c10::Error fn raises ("" when none).
std::string error_of(const std::function<void()> &fn) {
    try {
        fn();
    } catch (const c10::Error &e) {
        return e.what();
    }
    return "";
}

TEST(OptimizerSteps, BadInputsAreClearErrors) {
    const auto p = at::randn({8});
    const auto g = at::randn({8});
    const auto buf = at::zeros({8});
    EXPECT_NE(error_of([&] { sgd_step(at::zeros({8}, at::kInt), g, buf, c10::nullopt, 0.1, 0, 0, 0, false, false, true); })
                  .find("must be float32, or bfloat16"),
              std::string::npos);
    EXPECT_NE(error_of([&] { sgd_step(p.clone(), at::randn({9}), buf, c10::nullopt, 0.1, 0, 0, 0, false, false, true); })
                  .find("the gradient has shape"),
              std::string::npos);
    EXPECT_NE(error_of([&] { sgd_step(p.clone(), g, c10::nullopt, c10::nullopt, 0.1, 0.9, 0, 0, false, false, true); })
                  .find("needs momentum_buf"),
              std::string::npos);
    EXPECT_NE(error_of([&] { sgd_step(p.clone(), g, at::zeros({4}), c10::nullopt, 0.1, 0.9, 0, 0, false, false, true); })
                  .find("momentum_buf has shape"),
              std::string::npos);
    const auto top = p.to(at::kBFloat16);
    EXPECT_NE(error_of([&] { sgd_step(top, g, buf, c10::nullopt, 0.1, 0, 0, 0, false, false, true); })
                  .find("needs its trail"),
              std::string::npos);
    EXPECT_NE(error_of([&] { sgd_step(top, g, buf, at::zeros({8}, at::kInt), 0.1, 0, 0, 0, false, false, true); })
                  .find("the trail must be int16"),
              std::string::npos);
    EXPECT_NE(error_of([&] { sgd_step(top, g, buf, at::zeros({7}, at::kShort), 0.1, 0, 0, 0, false, false, true); })
                  .find("the trail has shape"),
              std::string::npos);
    EXPECT_NE(error_of([&] { sgd_step(p.clone(), g, buf, at::zeros({8}, at::kShort), 0.1, 0, 0, 0, false, false, true); })
                  .find("goes with a bf16 parameter"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  adam_step(p.clone(), g, at::zeros({8}, at::kDouble), at::zeros({8}), c10::nullopt, c10::nullopt, 1,
                            1e-3, 0.9, 0.999, 1e-8, 0, false, false);
              }).find("exp_avg must be float32"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  adamw_step(p.clone(), g, at::zeros({8}), at::zeros({8}), c10::nullopt, c10::nullopt, 1, 1e-3, 0.9,
                             0.999, 1e-8, 0, true, false);
              }).find("amsgrad needs max_exp_avg_sq"),
              std::string::npos);
    EXPECT_NE(error_of([&] { adagrad_step(p.clone(), g, at::zeros({8}, at::kBFloat16), c10::nullopt, 1, 0.1, 0, 0, 1e-10, false); })
                  .find("state_sum must be float32"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  adam_step(p.clone(), g, at::zeros({8}), at::zeros({8}), c10::nullopt, c10::nullopt, 0, 1e-3, 0.9,
                            0.999, 1e-8, 0, false, false);
              }).find("step counts from 1"),
              std::string::npos);
}

}  // namespace
}  // namespace ipex::train
