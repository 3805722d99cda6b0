// The fused optimizer steps (train_ops.h): argument checks, the hyper-parameters as aten rounds
// them, and the parallel loop over chunks of the element loops (step_kernels.h). Each element is
// updated by the scalar formula of torch.optim's single-tensor step in aten's order of
// operations and rounding: add with an alpha and addcmul are fused multiply-adds as aten's
// vectorized kernels compute them (value * t1 then one fma), every other op rounds on its own,
// and each double hyper-parameter is rounded to float where aten rounds it.
#include "train/train_ops.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "ops/op_errors.h"
#include "train/step_args.h"
#include "train/step_kernels.h"

namespace ipex::train {
namespace {

void adam_like_step(const char *op, bool decoupled, at::Tensor &param, const at::Tensor &grad,
                    at::Tensor &exp_avg, at::Tensor &exp_avg_sq, const c10::optional<at::Tensor> &max_exp_avg_sq,
                    const c10::optional<at::Tensor> &trail, int64_t step, double lr, double beta1, double beta2,
                    double eps, double weight_decay, bool amsgrad, bool maximize) {
    AdamArgs a;
    a.io = buffers_of(op, param, grad, trail);
    a.exp_avg = state_of(op, param, exp_avg, "exp_avg");
    a.exp_avg_sq = state_of(op, param, exp_avg_sq, "exp_avg_sq");
    if (amsgrad) {
        IPEX_CHECK_INPUT(max_exp_avg_sq.has_value(), op, ": amsgrad needs max_exp_avg_sq");
        a.max_exp_avg_sq = state_of(op, param, *max_exp_avg_sq, "max_exp_avg_sq");
    }
    IPEX_CHECK_INPUT(step >= 1, op, ": step counts from 1, got ", step);
    const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
    const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
    a.decoupled = decoupled;
    a.has_decay = weight_decay != 0;
    a.maximize = maximize;
    a.decay = static_cast<float>(1 - lr * weight_decay);
    a.l2 = static_cast<float>(weight_decay);
    a.beta1 = static_cast<float>(beta1);
    a.one_minus_beta1 = static_cast<float>(1 - beta1);
    a.beta2 = static_cast<float>(beta2);
    a.one_minus_beta2 = static_cast<float>(1 - beta2);
    a.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    a.eps = static_cast<float>(eps);
    a.neg_step_size = static_cast<float>(-(lr / bias_correction1));
    run(&ref::adam_range, &avx2::adam_range, a, param.numel());
    bump_versions(param, trail, {&exp_avg, &exp_avg_sq, amsgrad ? &*max_exp_avg_sq : nullptr});
}

}  // namespace

void sgd_step(at::Tensor param, const at::Tensor &grad, const c10::optional<at::Tensor> &momentum_buf,
              const c10::optional<at::Tensor> &trail, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov, bool maximize, bool first_step) {
    const char *op = "ipex::sgd_step";
    SgdArgs a;
    a.io = buffers_of(op, param, grad, trail);
    if (momentum != 0) {
        IPEX_CHECK_INPUT(momentum_buf.has_value(), op, ": momentum != 0 needs momentum_buf");
        a.momentum_buf = state_of(op, param, *momentum_buf, "momentum_buf");
    }
    a.has_decay = weight_decay != 0;
    a.nesterov = nesterov;
    a.maximize = maximize;
    a.first_step = first_step;
    a.decay = static_cast<float>(weight_decay);
    a.momentum = static_cast<float>(momentum);
    a.one_minus_dampening = static_cast<float>(1 - dampening);
    a.neg_lr = static_cast<float>(-lr);
    run(&ref::sgd_range, &avx2::sgd_range, a, param.numel());
    bump_versions(param, trail, {momentum != 0 ? &*momentum_buf : nullptr});
}

void adagrad_step(at::Tensor param, const at::Tensor &grad, at::Tensor state_sum,
                  const c10::optional<at::Tensor> &trail, int64_t step, double lr, double lr_decay,
                  double weight_decay, double eps, bool maximize) {
    const char *op = "ipex::adagrad_step";
    AdagradArgs a;
    a.io = buffers_of(op, param, grad, trail);
    a.sum = state_of(op, param, state_sum, "state_sum");
    IPEX_CHECK_INPUT(step >= 1, op, ": step counts from 1, got ", step);
    a.has_decay = weight_decay != 0;
    a.maximize = maximize;
    a.decay = static_cast<float>(weight_decay);
    a.eps = static_cast<float>(eps);
    a.neg_clr = static_cast<float>(-(lr / (1 + static_cast<double>(step - 1) * lr_decay)));
    run(&ref::adagrad_range, &avx2::adagrad_range, a, param.numel());
    bump_versions(param, trail, {&state_sum});
}

void adam_step(at::Tensor param, const at::Tensor &grad, at::Tensor exp_avg, at::Tensor exp_avg_sq,
               const c10::optional<at::Tensor> &max_exp_avg_sq, const c10::optional<at::Tensor> &trail,
               int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay,
               bool amsgrad, bool maximize) {
    adam_like_step("ipex::adam_step", false, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, trail, step, lr,
                   beta1, beta2, eps, weight_decay, amsgrad, maximize);
}

void adamw_step(at::Tensor param, const at::Tensor &grad, at::Tensor exp_avg, at::Tensor exp_avg_sq,
                const c10::optional<at::Tensor> &max_exp_avg_sq, const c10::optional<at::Tensor> &trail,
                int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay,
                bool amsgrad, bool maximize) {
    adam_like_step("ipex::adamw_step", true, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, trail, step, lr,
                   beta1, beta2, eps, weight_decay, amsgrad, maximize);
}

}  // namespace ipex::train
