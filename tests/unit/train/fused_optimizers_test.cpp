// The libtorch optimizers over the fused steps (train/fused_optimizers.h) against torch::optim's
// on the same gradients, two parameter groups, 200 steps (within 1 ulp; bitwise on Debian's
// libtorch 1.13), and a save / load round trip through torch::save that continues identically.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "train/fused_optimizers.h"

namespace ipex::train {
namespace {

constexpr int kSteps = 200;

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

}  // namespace
}  // namespace ipex::train
