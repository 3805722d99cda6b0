// Fused in-place optimizer steps (ipex::sgd_step, adagrad_step, adam_step, adamw_step): one pass
// over a parameter, its gradient and its state. Each takes an fp32 parameter, or a bf16 one with
// its `trail` (int16): the parameter holds the top 16 bits of the fp32 master weight and the
// trail the bottom 16, so top + trail is the master exactly. The update is the fp32 formula of
// torch.optim (1.13), in its order of operations; a split parameter is recombined, updated with
// that same formula and split again (top = the upper 16 bits, no rounding). State tensors are
// fp32; gradients fp32 or bf16.
#pragma once

#include <ATen/ATen.h>

#include <c10/util/Optional.h>

namespace ipex::train {

// torch.optim.SGD's step. `momentum_buf` is needed when momentum != 0; with first_step it is
// set to the gradient (torch's clone of d_p) instead of being decayed.
void sgd_step(at::Tensor param, const at::Tensor &grad, const c10::optional<at::Tensor> &momentum_buf,
              const c10::optional<at::Tensor> &trail, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov, bool maximize, bool first_step);

// torch.optim.Adagrad's step on a dense gradient: `state_sum` accumulates the squared
// gradients; `step` counts from 1 (the learning rate decays as lr / (1 + (step - 1) * lr_decay)).
void adagrad_step(at::Tensor param, const at::Tensor &grad, at::Tensor state_sum,
                  const c10::optional<at::Tensor> &trail, int64_t step, double lr, double lr_decay,
                  double weight_decay, double eps, bool maximize);

// torch.optim.Adam's step (L2 weight decay added to the gradient); `step` counts from 1.
void adam_step(at::Tensor param, const at::Tensor &grad, at::Tensor exp_avg, at::Tensor exp_avg_sq,
               const c10::optional<at::Tensor> &max_exp_avg_sq, const c10::optional<at::Tensor> &trail,
               int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay,
               bool amsgrad, bool maximize);

// torch.optim.AdamW's step (decoupled weight decay: param *= 1 - lr * weight_decay first).
void adamw_step(at::Tensor param, const at::Tensor &grad, at::Tensor exp_avg, at::Tensor exp_avg_sq,
                const c10::optional<at::Tensor> &max_exp_avg_sq, const c10::optional<at::Tensor> &trail,
                int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay,
                bool amsgrad, bool maximize);

}  // namespace ipex::train
