// The libtorch optimizers over the fused steps (fused_optimizers.h). State is kept as torch's
// optimizers keep it: keyed by the parameter's TensorImpl, torch's ParamState types, fp32 also
// for a split (bf16) parameter; the trails beside it in WithSplitMasters.
#include "train/fused_optimizers.h"

#include <c10/util/string_utils.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/serialize/archive.h>

#include <memory>
#include <string>

#include "ops/op_errors.h"
#include "train/train_ops.h"

namespace ipex::train {
namespace {

using States = ska::flat_hash_map<std::string, std::unique_ptr<torch::optim::OptimizerParamState>>;

std::string key_of(const at::Tensor &param) { return c10::guts::to_string(param.unsafeGetTensorImpl()); }

// Runs the closure with gradients enabled, as torch's optimizers do.
at::Tensor run_closure(const torch::optim::Optimizer::LossClosure &closure) {
    if (!closure) return {};
    at::AutoGradMode enable_grad(true);
    return closure();
}

template <typename State>
State &state_for(States &states, const at::Tensor &param, bool *created = nullptr) {
    const std::string key = key_of(param);
    auto it = states.find(key);
    if (created) *created = it == states.end();
    if (it == states.end()) it = states.emplace(key, std::make_unique<State>()).first;
    return static_cast<State &>(*it->second);
}

// fp32 state of the parameter's shape (also for a bf16 top).
at::Tensor fp32_full(const at::Tensor &param, double value) {
    return at::full(param.sizes(), value, param.options().dtype(at::kFloat));
}

// A sparse gradient's row indices and values, checked for the sparse steps.
struct SparseGrad {
    at::Tensor indices, values;
};

SparseGrad sparse_rows(const char *optimizer, const at::Tensor &grad, double weight_decay) {
    IPEX_CHECK_INPUT(weight_decay == 0, optimizer, ": weight_decay is not compatible with sparse gradients (as in "
                     "torch.optim); set it to 0 for the embedding's parameter group");
    IPEX_CHECK_INPUT(grad.sparse_dim() == 1, optimizer, ": a sparse gradient must index rows (sparse_dim 1, as an "
                     "Embedding's), not sparse_dim ", grad.sparse_dim());
    return {grad._indices().select(0, 0).contiguous(), grad._values().contiguous()};
}

// One Adam-family (or Lamb) step over every parameter with a gradient.
template <typename Options, typename State, typename Step>
void adam_family_step(std::vector<torch::optim::OptimizerParamGroup> &groups, States &states, const Step &step) {
    for (auto &group : groups) {
        const auto &o = static_cast<const Options &>(group.options());
        for (auto &param : group.params()) {
            if (!param.grad().defined()) continue;
            bool created = false;
            auto &state = state_for<State>(states, param, &created);
            if (created) {
                state.step(0);
                state.exp_avg(fp32_full(param, 0));
                state.exp_avg_sq(fp32_full(param, 0));
                if (o.amsgrad()) state.max_exp_avg_sq(fp32_full(param, 0));
            }
            state.step(state.step() + 1);
            step(param, state, o);
        }
    }
}

}  // namespace

template <typename Base>
void WithSplitMasters<Base>::split_to_bf16() {
    at::NoGradGuard no_grad;
    for (auto &group : this->param_groups()) {
        for (auto &param : group.params()) {
            if (param.scalar_type() != at::kFloat) continue;
            IPEX_CHECK_INPUT(param.is_contiguous(), "split_to_bf16: parameters must be contiguous");
            const auto bits = param.detach().view(at::kInt);
            auto top = bits.__rshift__(16).to(at::kShort).view(at::kBFloat16);
            trails_[param.unsafeGetTensorImpl()] = bits.bitwise_and(0xffff).to(at::kShort);
            param.set_data(top);
        }
    }
}

template <typename Base>
c10::optional<at::Tensor> WithSplitMasters<Base>::trail(const at::Tensor &param) const {
    const auto it = trails_.find(param.unsafeGetTensorImpl());
    if (it == trails_.end()) return c10::nullopt;
    return it->second;
}

template <typename Base>
at::Tensor WithSplitMasters<Base>::master(const at::Tensor &param) const {
    const auto low = trail(param);
    if (!low) return param.detach().clone();
    const auto high = param.detach().view(at::kShort).to(at::kInt).__lshift__(16);
    return high.bitwise_or(low->to(at::kInt).bitwise_and(0xffff)).view(at::kFloat);
}

template <typename Base>
void WithSplitMasters<Base>::save(torch::serialize::OutputArchive &archive) const {
    Base::save(archive);
    int64_t index = 0;
    for (const auto &group : this->param_groups()) {
        for (const auto &param : group.params()) {
            if (const auto low = trail(param)) archive.write("ipex_trail/" + std::to_string(index), *low);
            ++index;
        }
    }
}

template <typename Base>
void WithSplitMasters<Base>::load(torch::serialize::InputArchive &archive) {
    Base::load(archive);
    int64_t index = 0;
    for (auto &group : this->param_groups()) {
        for (auto &param : group.params()) {
            at::Tensor low;
            if (archive.try_read("ipex_trail/" + std::to_string(index), low)) {
                IPEX_CHECK_INPUT(param.scalar_type() == at::kBFloat16 && low.sizes() == param.sizes(),
                                 "optimizer load: parameter ", index, " has a saved trail of shape ", low.sizes(),
                                 " but is ", param.scalar_type(), " of shape ", param.sizes(),
                                 " (call split_to_bf16() before loading a split optimizer)");
                trails_[param.unsafeGetTensorImpl()] = low;
            } else {
                IPEX_CHECK_INPUT(param.scalar_type() != at::kBFloat16, "optimizer load: parameter ", index,
                                 " is a split bf16 master weight but the archive has no trail for it");
            }
            ++index;
        }
    }
}

template class WithSplitMasters<torch::optim::SGD>;
template class WithSplitMasters<torch::optim::Adagrad>;
template class WithSplitMasters<torch::optim::Adam>;
template class WithSplitMasters<torch::optim::AdamW>;

at::Tensor FusedSGD::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    for (auto &group : param_groups_) {
        const auto &o = static_cast<const torch::optim::SGDOptions &>(group.options());
        for (auto &param : group.params()) {
            const auto &grad = param.grad();
            if (!grad.defined()) continue;
            if (grad.is_sparse()) {
                IPEX_CHECK_INPUT(o.momentum() == 0, "FusedSGD: momentum with sparse gradients is not supported (torch "
                                 "keeps a sparse momentum buffer that grows each step); use momentum 0 for the "
                                 "embedding's parameter group");
                const auto rows = sparse_rows("FusedSGD", grad, o.weight_decay());
                sparse_sgd_step(param, rows.indices, rows.values, trail(param), o.lr(), false);
                continue;
            }
            c10::optional<at::Tensor> buf;
            bool first_step = false;
            if (o.momentum() != 0) {
                auto &state = state_for<torch::optim::SGDParamState>(state_, param, &first_step);
                if (first_step) state.momentum_buffer(fp32_full(param, 0));
                buf = state.momentum_buffer();
            }
            sgd_step(param, grad.contiguous(), buf, trail(param), o.lr(), o.momentum(), o.dampening(),
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
            const auto &grad = param.grad();
            if (!grad.defined()) continue;
            bool created = false;
            auto &state = state_for<torch::optim::AdagradParamState>(state_, param, &created);
            if (created) {
                state.step(0);
                state.sum(fp32_full(param, o.initial_accumulator_value()));
            }
            state.step(state.step() + 1);
            if (grad.is_sparse()) {
                const auto rows = sparse_rows("FusedAdagrad", grad, o.weight_decay());
                sparse_adagrad_step(param, rows.indices, rows.values, state.sum(), trail(param), state.step(), o.lr(),
                                    o.lr_decay(), o.eps(), false);
                continue;
            }
            adagrad_step(param, grad.contiguous(), state.sum(), trail(param), state.step(), o.lr(), o.lr_decay(),
                         o.weight_decay(), o.eps(), false);
        }
    }
    return loss;
}

namespace {

// Adam and AdamW: the same state and arguments, a different kernel (where the decay applies).
template <typename Options, typename State, typename Kernel, typename TrailOf>
void adam_like_step(std::vector<torch::optim::OptimizerParamGroup> &groups, States &states, const Kernel &kernel,
                    const TrailOf &trail_of) {
    adam_family_step<Options, State>(groups, states, [&](at::Tensor &param, State &s, const auto &o) {
        const auto max_sq = o.amsgrad() ? c10::optional<at::Tensor>(s.max_exp_avg_sq()) : c10::nullopt;
        kernel(param, param.grad().contiguous(), s.exp_avg(), s.exp_avg_sq(), max_sq, trail_of(param), s.step(), o.lr(),
               std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), o.amsgrad(), false);
    });
}

}  // namespace

at::Tensor FusedAdam::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    adam_like_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(
        param_groups_, state_, adam_step, [&](const at::Tensor &p) { return trail(p); });
    return loss;
}

at::Tensor FusedAdamW::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    adam_like_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
        param_groups_, state_, adamw_step, [&](const at::Tensor &p) { return trail(p); });
    return loss;
}

at::Tensor FusedLamb::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    adam_family_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(
        param_groups_, state_, [&](at::Tensor &param, torch::optim::AdamParamState &s, const auto &o) {
            IPEX_CHECK_INPUT(!o.amsgrad(), "FusedLamb: Lamb has no amsgrad; leave AdamOptions::amsgrad false");
            lamb_step(param, param.grad().contiguous(), s.exp_avg(), s.exp_avg_sq(), trail(param), s.step(), o.lr(),
                      std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay());
        });
    return loss;
}

FusedLars::FusedLars(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::SGDOptions defaults,
                     LarsCoefficients coefficients)
    : WithSplitMasters<torch::optim::SGD>(std::move(groups), defaults), coefficients_(coefficients) {
    IPEX_CHECK_INPUT(coefficients.eeta > 0 && coefficients.eeta <= 1, "FusedLars: eeta must be in (0, 1], got ",
                     coefficients.eeta);
    IPEX_CHECK_INPUT(coefficients.epsilon >= 0, "FusedLars: epsilon must be >= 0, got ", coefficients.epsilon);
}

FusedLars::FusedLars(std::vector<at::Tensor> params, torch::optim::SGDOptions defaults, LarsCoefficients coefficients)
    : FusedLars({torch::optim::OptimizerParamGroup(std::move(params))}, defaults, coefficients) {}

at::Tensor FusedLars::step(LossClosure closure) {
    at::Tensor loss = run_closure(closure);
    at::NoGradGuard no_grad;
    for (auto &group : param_groups_) {
        const auto &o = static_cast<const torch::optim::SGDOptions &>(group.options());
        IPEX_CHECK_INPUT(o.dampening() == 0 && !o.nesterov(), "FusedLars: Lars has no dampening or nesterov; leave "
                         "them at 0 / false");
        for (auto &param : group.params()) {
            if (!param.grad().defined()) continue;
            c10::optional<at::Tensor> buf;
            bool first_step = false;
            if (o.momentum() != 0) {
                auto &state = state_for<torch::optim::SGDParamState>(state_, param, &first_step);
                if (first_step) state.momentum_buffer(fp32_full(param, 0));
                buf = state.momentum_buffer();
            }
            lars_step(param, param.grad().contiguous(), buf, trail(param), o.lr(), o.momentum(), coefficients_.eeta,
                      coefficients_.epsilon, o.weight_decay(), first_step);
        }
    }
    return loss;
}

}  // namespace ipex::train
