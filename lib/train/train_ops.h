// Fused in-place optimizer steps (ipex::sgd_step, adagrad_step, adam_step, adamw_step, lamb_step,
// lars_step; sparse_sgd_step, sparse_adagrad_step): one pass
// over a parameter, its gradient and its state. Each takes an fp32 parameter, or a bf16 one with
// its `trail` (int16): the parameter holds the top 16 bits of the fp32 master weight and the
// trail the bottom 16, so top + trail is the master exactly. The update is the fp32 formula of
// torch.optim (1.13), in its order of operations; a split parameter is recombined, updated with
// that same formula and split again (top = the upper 16 bits, no rounding). State tensors are
// fp32; gradients fp32 or bf16. Each bumps the version counters of the tensors it writes, as an
// in-place torch op does.
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

// Lamb (You et al. 2019, as IPEX's Lamb computes it): m and v as Adam's, the update
// u = (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * p, then p -= lr * (||p|| / ||u||) * u
// (ratio 1 when either norm is 0). `step` counts from 1. No maximize (IPEX's Lamb has none).
void lamb_step(at::Tensor param, const at::Tensor &grad, at::Tensor exp_avg, at::Tensor exp_avg_sq,
               const c10::optional<at::Tensor> &trail, int64_t step, double lr, double beta1, double beta2, double eps,
               double weight_decay);

// Lars (You et al. 2017, as IPEX's fused Lars computes it): the trust ratio
// eeta * ||p|| / (||g|| + weight_decay * ||p|| + eps) (1 when either norm is 0) scales lr, then
// torch.optim.SGD's step without dampening or nesterov: d = g + weight_decay * p,
// buf = momentum * buf + d (buf = d on the first step), p -= lr * ratio * buf.
void lars_step(at::Tensor param, const at::Tensor &grad, const c10::optional<at::Tensor> &momentum_buf,
               const c10::optional<at::Tensor> &trail, double lr, double momentum, double eeta, double eps,
               double weight_decay, bool first_step);

// Sparse row gradients (an Embedding's or EmbeddingBag's sparse COO gradient: `indices` int64
// [nnz], `values` [nnz, row...] fp32 or bf16; the recommendation ops call these with their own
// rows). Parameter, trail and state as for the dense steps.
//
// torch.optim.SGD's step with momentum 0 and no weight decay (torch refuses weight decay on a
// sparse gradient): p[indices[k]] += -lr * values[k] for every k in order, duplicates one after
// the other, as torch's index_add_.
void sparse_sgd_step(at::Tensor param, const at::Tensor &indices, const at::Tensor &values,
                     const c10::optional<at::Tensor> &trail, double lr, bool maximize);

// torch.optim.Adagrad's sparse step (no weight decay): the rows of each index summed in fp32 in
// the order torch's coalesce sums them (aten 1.13 sorts the indices with std::sort, which is
// not stable; the step sorts them the same way), then for those rows only sum += g * g and
// p += -clr * g / (sqrt(sum) + eps), clr = lr / (1 + (step - 1) * lr_decay).
void sparse_adagrad_step(at::Tensor param, const at::Tensor &indices, const at::Tensor &values, at::Tensor state_sum,
                         const c10::optional<at::Tensor> &trail, int64_t step, double lr, double lr_decay, double eps,
                         bool maximize);

}  // namespace ipex::train
