// The libtorch optimizers over the fused steps (train/fused_optimizers.h) against torch::optim's
// on the same gradients, two parameter groups, 200 steps (within 1 ulp; bitwise on Debian's
// libtorch 1.13), and a save / load round trip through torch::save that continues identically;
// split bf16 masters (split_to_bf16) against the fp32 optimizer on the same bf16 gradients
// (bitwise, every optimizer, trails through save / load); Lamb and Lars as their ops; sparse
// Embedding gradients against torch::optim::SGD / Adagrad (within 1 ulp, duplicates and empty
// gradients included).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "train/fused_optimizers.h"
#include "train/train_ops.h"

#include "step_count.h"

namespace ipex::train {
namespace {


int64_t max_ulp(const at::Tensor &got, const at::Tensor &want) {
    const auto diff = (got.contiguous().view(at::kInt).to(at::kLong) - want.contiguous().view(at::kInt).to(at::kLong));
    return diff.abs().max().item<int64_t>();  // same-sign values: the distance in floats
}

std::vector<at::Tensor> make_params(uint64_t seed) {
    at::manual_seed(seed);
    return {torch::randn({257, 3}).requires_grad_(true), torch::randn({1000}).requires_grad_(true)};
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor> &params) {
    std::vector<at::Tensor> out;
    for (const auto &p : params) out.push_back(p.detach().clone().requires_grad_(true));
    return out;
}

// Runs both optimizers over the same gradients and checks the parameters after every step.
void expect_same_run(torch::optim::Optimizer &fused, std::vector<at::Tensor> &fused_params,
                     torch::optim::Optimizer &reference, std::vector<at::Tensor> &reference_params, int steps,
                     uint64_t seed) {
    at::manual_seed(seed);
    for (int s = 0; s < steps; ++s) {
        for (size_t i = 0; i < fused_params.size(); ++i) {
            const auto grad = torch::randn(fused_params[i].sizes()) * 0.1;
            fused_params[i].mutable_grad() = grad.clone();
            reference_params[i].mutable_grad() = grad.clone();
        }
        fused.step();
        reference.step();
        for (size_t i = 0; i < fused_params.size(); ++i)
            ASSERT_LE(max_ulp(fused_params[i].detach(), reference_params[i].detach()), 1) << "step " << s;
    }
}

template <typename Fused, typename Reference, typename Options>
void check(const Options &options, const Options &second_group) {
    auto a = make_params(1);
    auto b = clones(a);
    Fused fused({torch::optim::OptimizerParamGroup({a[0]}),
                 torch::optim::OptimizerParamGroup({a[1]}, std::make_unique<Options>(second_group))},
                options);
    Reference reference({torch::optim::OptimizerParamGroup({b[0]}),
                         torch::optim::OptimizerParamGroup({b[1]}, std::make_unique<Options>(second_group))},
                        options);
    expect_same_run(fused, a, reference, b, kSteps, 2);
}

TEST(FusedOptimizers, SgdEqualsTorch) {
    check<FusedSGD, torch::optim::SGD>(torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-2),
                                       torch::optim::SGDOptions(0.01).momentum(0.9).nesterov(true));
}

TEST(FusedOptimizers, AdagradEqualsTorch) {
    check<FusedAdagrad, torch::optim::Adagrad>(torch::optim::AdagradOptions(0.01).lr_decay(1e-3),
                                               torch::optim::AdagradOptions(0.02).weight_decay(1e-2)
                                                   .initial_accumulator_value(0.1));
}

TEST(FusedOptimizers, AdamEqualsTorch) {
    check<FusedAdam, torch::optim::Adam>(torch::optim::AdamOptions(1e-3).amsgrad(true),
                                         torch::optim::AdamOptions(1e-2).weight_decay(1e-2));
}

TEST(FusedOptimizers, AdamWEqualsTorch) {
    check<FusedAdamW, torch::optim::AdamW>(torch::optim::AdamWOptions(1e-3),
                                           torch::optim::AdamWOptions(1e-2).amsgrad(true).weight_decay(0.1));
}

TEST(FusedOptimizers, SaveAndLoadContinueIdentically) {
    auto a = make_params(3);
    FusedAdam fused(a, torch::optim::AdamOptions(1e-2).amsgrad(true));
    auto b = clones(a);
    torch::optim::Adam reference(b, torch::optim::AdamOptions(1e-2).amsgrad(true));
    expect_same_run(fused, a, reference, b, 10, 4);
    std::stringstream saved;
    torch::save(fused, saved);
    auto c = clones(a);
    FusedAdam restored(c, torch::optim::AdamOptions(1e-2).amsgrad(true));
    torch::load(restored, saved);
    expect_same_run(restored, c, fused, a, 10, 5);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], c[i]));
}

// ---- split bf16 masters: the split optimizer against the fp32 one on the same bf16 gradients ----

bool same_bits(const at::Tensor &a, const at::Tensor &b) {
    return a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && at::equal(a.view(at::kInt), b.view(at::kInt));
}

// Steps `split` (after split_to_bf16) and `fp32` with the same bf16-valued gradients; after every
// step the recombined masters equal the fp32 parameters bit for bit.
template <typename Fused>
void expect_split_equals_fp32(Fused &split, std::vector<at::Tensor> &split_params, Fused &fp32,
                              std::vector<at::Tensor> &fp32_params, int steps, uint64_t seed) {
    at::manual_seed(seed);
    for (int s = 0; s < steps; ++s) {
        for (size_t i = 0; i < split_params.size(); ++i) {
            const auto grad = (torch::randn(split_params[i].sizes()) * 0.1).to(at::kBFloat16);
            split_params[i].mutable_grad() = grad;
            fp32_params[i].mutable_grad() = grad.to(at::kFloat);
        }
        split.step();
        fp32.step();
        for (size_t i = 0; i < split_params.size(); ++i) {
            ASSERT_EQ(split_params[i].scalar_type(), at::kBFloat16);
            ASSERT_TRUE(same_bits(split.master(split_params[i]), fp32_params[i].detach())) << "step " << s;
        }
    }
}

template <typename Fused, typename Options>
void check_split(const Options &options, int steps = kSteps) {
    auto a = make_params(11);
    auto b = clones(a);
    Fused split(a, options), fp32(b, options);
    split.split_to_bf16();
    expect_split_equals_fp32(split, a, fp32, b, steps, 12);
}

TEST(FusedOptimizersSplit, SgdRecombinesExactly) {
    check_split<FusedSGD>(torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-2));
}

TEST(FusedOptimizersSplit, AdagradRecombinesExactly) {
    check_split<FusedAdagrad>(torch::optim::AdagradOptions(0.01).lr_decay(1e-3).initial_accumulator_value(0.1));
}

TEST(FusedOptimizersSplit, AdamRecombinesExactly) {
    check_split<FusedAdam>(torch::optim::AdamOptions(1e-3).amsgrad(true).weight_decay(1e-2));
}

TEST(FusedOptimizersSplit, AdamWRecombinesExactly) {
    check_split<FusedAdamW>(torch::optim::AdamWOptions(1e-3).weight_decay(0.1));
}

TEST(FusedOptimizersSplit, LambRecombinesExactly) {
    check_split<FusedLamb>(torch::optim::AdamOptions(1e-2).weight_decay(1e-2));
}

TEST(FusedOptimizersSplit, LarsRecombinesExactly) {
    auto a = make_params(13);
    auto b = clones(a);
    const auto options = torch::optim::SGDOptions(0.5).momentum(0.9).weight_decay(5e-4);
    FusedLars split(a, options, {2e-3, 1e-8}), fp32(b, options, {2e-3, 1e-8});
    split.split_to_bf16();
    expect_split_equals_fp32(split, a, fp32, b, kSteps, 14);
}

TEST(FusedOptimizersSplit, SaveAndLoadCarryTheTrails) {
    auto a = make_params(15);
    auto b = clones(a);
    const auto options = torch::optim::AdamOptions(1e-2);
    FusedAdam split(a, options), fp32(b, options);
    split.split_to_bf16();
    expect_split_equals_fp32(split, a, fp32, b, 5, 16);
    std::stringstream saved;
    torch::save(split, saved);
    std::vector<at::Tensor> c;
    for (const auto &p : a) c.push_back(p.detach().clone().to(at::kFloat).requires_grad_(true));
    FusedAdam restored(c, options);
    restored.split_to_bf16();  // the tops again; the trails come from the archive
    torch::load(restored, saved);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(restored.master(c[i]), fp32.master(b[i])));
    expect_split_equals_fp32(restored, c, fp32, b, 5, 17);

    std::vector<at::Tensor> d = clones(b);
    FusedAdam unsplit(d, options);
    std::stringstream again;
    torch::save(split, again);
    EXPECT_THROW(torch::load(unsplit, again), c10::Error);  // a trail for an fp32 parameter
}

// ---- Lamb and Lars classes: the ops, per group ----

TEST(FusedOptimizers, LambAndLarsStepTheirOps) {
    auto a = make_params(21);
    std::vector<at::Tensor> b;
    for (const auto &p : a) b.push_back(p.detach().clone());
    FusedLamb lamb({a[0]}, torch::optim::AdamOptions(1e-2).betas({0.8, 0.99}).weight_decay(1e-2));
    FusedLars lars({a[1]}, torch::optim::SGDOptions(0.5).momentum(0.9).weight_decay(1e-3), {2e-3, 0});
    auto m = at::zeros_like(b[0]), v = at::zeros_like(b[0]), buf = at::zeros_like(b[1]);
    at::manual_seed(22);
    for (int s = 0; s < 20; ++s) {
        const auto g0 = torch::randn(a[0].sizes()), g1 = torch::randn(a[1].sizes());
        a[0].mutable_grad() = g0;
        a[1].mutable_grad() = g1;
        lamb.step();
        lars.step();
        lamb_step(b[0], g0, m, v, c10::nullopt, s + 1, 1e-2, 0.8, 0.99, 1e-8, 1e-2);
        lars_step(b[1], g1, buf, c10::nullopt, 0.5, 0.9, 2e-3, 0, 1e-3, s == 0);
        ASSERT_TRUE(same_bits(a[0].detach(), b[0]) && same_bits(a[1].detach(), b[1])) << "step " << s;
    }
    FusedLamb amsgrad({a[0]}, torch::optim::AdamOptions(1e-2).amsgrad(true));
    EXPECT_THROW(amsgrad.step(), c10::Error);
    FusedLars nesterov({a[1]}, torch::optim::SGDOptions(0.5).momentum(0.9).nesterov(true));
    EXPECT_THROW(nesterov.step(), c10::Error);
}

// ---- sparse gradients: FusedSGD and FusedAdagrad against torch::optim's on Embedding gradients ----

// A sparse row gradient with duplicate indices (uncoalesced, as nn::Embedding(sparse) gives).
at::Tensor sparse_grad(int64_t rows, int64_t dim, int64_t nnz) {
    const auto indices = torch::randint(0, rows, {1, nnz}, at::kLong);
    return at::_sparse_coo_tensor_unsafe(indices, torch::randn({nnz, dim}) * 0.1, {rows, dim});
}

// libtorch's C++ Adagrad fails on an empty sparse gradient (torch.optim's Python one does not:
// tests/python/test_training_sparse.py has that case), so only SGD's run takes empty ones here.
template <typename Fused, typename Reference, typename Options>
void check_sparse(const Options &options, bool empty_grads) {
    constexpr int64_t kRows = 50, kDim = 19;
    at::manual_seed(31);
    auto a = torch::randn({kRows, kDim}).requires_grad_(true);
    auto b = a.detach().clone().requires_grad_(true);
    Fused fused({a}, options);
    Reference reference({b}, options);
    for (int s = 0; s < kSteps; ++s) {
        const auto grad = empty_grads && s % 50 == 7 ? sparse_grad(kRows, kDim, 0) : sparse_grad(kRows, kDim, 1 + s % 40);
        a.mutable_grad() = grad.clone();
        b.mutable_grad() = grad.clone();
        fused.step();
        reference.step();
        ASSERT_LE(max_ulp(a.detach(), b.detach()), 1) << "step " << s;
    }
}

TEST(FusedOptimizersSparse, SgdEqualsTorch) {
    check_sparse<FusedSGD, torch::optim::SGD>(torch::optim::SGDOptions(0.05), true);
}

TEST(FusedOptimizersSparse, AdagradEqualsTorch) {
    check_sparse<FusedAdagrad, torch::optim::Adagrad>(
        torch::optim::AdagradOptions(0.05).lr_decay(1e-3).initial_accumulator_value(0.1), false);
}

TEST(FusedOptimizersSparse, WeightDecayAndMomentumAreRefused) {
    auto a = torch::randn({10, 4}).requires_grad_(true);
    a.mutable_grad() = sparse_grad(10, 4, 6);
    FusedSGD momentum({a}, torch::optim::SGDOptions(0.1).momentum(0.9));
    EXPECT_THROW(momentum.step(), c10::Error);
    FusedSGD decay({a}, torch::optim::SGDOptions(0.1).weight_decay(0.1));
    EXPECT_THROW(decay.step(), c10::Error);
    FusedAdagrad adagrad_decay({a}, torch::optim::AdagradOptions(0.1).weight_decay(0.1));
    EXPECT_THROW(adagrad_decay.step(), c10::Error);
}

}  // namespace
}  // namespace ipex::train
