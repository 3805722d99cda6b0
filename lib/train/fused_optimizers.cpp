// The libtorch optimizers over the fused steps (fused_optimizers.h). State is kept as torch's
// optimizers keep it: keyed by the parameter's TensorImpl, torch's ParamState types.
#include "train/fused_optimizers.h"

#include <c10/util/string_utils.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <memory>
#include <string>

#include "train/train_ops.h"

namespace ipex::train {
namespace {

std::string key_of(const at::Tensor &param) { return c10::guts::to_string(param.unsafeGetTensorImpl()); }

// Runs the closure with gradients enabled, as torch's optimizers do.
at::Tensor run_closure(const torch::optim::Optimizer::LossClosure &closure) {
    if (!closure) return {};
    at::AutoGradMode enable_grad(true);
    return closure();
}

template <typename State>
State &state_for(ska::flat_hash_map<std::string, std::unique_ptr<torch::optim::OptimizerParamState>> &states,
                 const at::Tensor &param, bool *created = nullptr) {
    const std::string key = key_of(param);
    auto it = states.find(key);
    if (created) *created = it == states.end();
    if (it == states.end()) it = states.emplace(key, std::make_unique<State>()).first;
    return static_cast<State &>(*it->second);
}

// One Adam-family step over every parameter with a gradient.
template <typename Options, typename State>
void adam_family_step(std::vector<torch::optim::OptimizerParamGroup> &groups,
                      ska::flat_hash_map<std::string, std::unique_ptr<torch::optim::OptimizerParamState>> &states,
                      bool decoupled) {
    for (auto &group : groups) {
        const auto &o = static_cast<const Options &>(group.options());
        for (auto &param : group.params()) {
            if (!param.grad().defined()) continue;
            bool created = false;
            auto &state = state_for<State>(states, param, &created);
            if (created) {
                state.step(0);
                state.exp_avg(at::zeros_like(param, at::MemoryFormat::Contiguous));
                state.exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Contiguous));
                if (o.amsgrad()) state.max_exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Contiguous));
            }
            state.step(state.step() + 1);
            const auto max_sq = o.amsgrad() ? c10::optional<at::Tensor>(state.max_exp_avg_sq()) : c10::nullopt;
            const auto fn = decoupled ? adamw_step : adam_step;
            fn(param, param.grad().contiguous(), state.exp_avg(), state.exp_avg_sq(), max_sq, c10::nullopt,
               state.step(), o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(),
               o.amsgrad(), false);
        }
    }
}

}  // namespace

at::Tensor FusedSGD::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    for (auto &group : param_groups_) {
        const auto &o = static_cast<const torch::optim::SGDOptions &>(group.options());
        for (auto &param : group.params()) {
            if (!param.grad().defined()) continue;
            c10::optional<at::Tensor> buf;
            bool first_step = false;
            if (o.momentum() != 0) {
                auto &state = state_for<torch::optim::SGDParamState>(state_, param, &first_step);
                if (first_step) state.momentum_buffer(at::empty_like(param, at::MemoryFormat::Contiguous));
                buf = state.momentum_buffer();
            }
            sgd_step(param, param.grad().contiguous(), buf, c10::nullopt, o.lr(), o.momentum(), o.dampening(),
                     o.weight_decay(), o.nesterov(), false, first_step);
        }
    }
    return loss;
}

at::Tensor FusedAdagrad::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    for (auto &group : param_groups_) {
        const auto &o = static_cast<const torch::optim::AdagradOptions &>(group.options());
        for (auto &param : group.params()) {
            if (!param.grad().defined()) continue;
            bool created = false;
            auto &state = state_for<torch::optim::AdagradParamState>(state_, param, &created);
            if (created) {
                state.step(0);
                state.sum(at::full_like(param, o.initial_accumulator_value(), at::MemoryFormat::Contiguous));
            }
            state.step(state.step() + 1);
            adagrad_step(param, param.grad().contiguous(), state.sum(), c10::nullopt, state.step(), o.lr(),
                         o.lr_decay(), o.weight_decay(), o.eps(), false);
        }
    }
    return loss;
}

at::Tensor FusedAdam::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    adam_family_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(param_groups_, state_, false);
    return loss;
}

at::Tensor FusedAdamW::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    adam_family_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(param_groups_, state_, true);
    return loss;
}

}  // namespace ipex::train
