// The fused optimizer steps as ipex:: ops (train_ops.h).
#include <torch/library.h>

#include "ops/op_errors.h"
#include "train/train_ops.h"

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    using namespace ipex::train;
    m.def(
        "sgd_step(Tensor(a!) param, Tensor grad, Tensor(b!)? momentum_buf, Tensor(c!)? trail, float lr, "
        "float momentum, float dampening, float weight_decay, bool nesterov, bool maximize, bool first_step) -> ()",
        IPEX_GUARDED(sgd_step));
    m.def(
        "adagrad_step(Tensor(a!) param, Tensor grad, Tensor(b!) state_sum, Tensor(c!)? trail, int step, float lr, "
        "float lr_decay, float weight_decay, float eps, bool maximize) -> ()",
        IPEX_GUARDED(adagrad_step));
    m.def(
        "adam_step(Tensor(a!) param, Tensor grad, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, "
        "Tensor(d!)? max_exp_avg_sq, Tensor(e!)? trail, int step, float lr, float beta1, float beta2, float eps, "
        "float weight_decay, bool amsgrad, bool maximize) -> ()",
        IPEX_GUARDED(adam_step));
    m.def(
        "adamw_step(Tensor(a!) param, Tensor grad, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, "
        "Tensor(d!)? max_exp_avg_sq, Tensor(e!)? trail, int step, float lr, float beta1, float beta2, float eps, "
        "float weight_decay, bool amsgrad, bool maximize) -> ()",
        IPEX_GUARDED(adamw_step));
    m.def(
        "lamb_step(Tensor(a!) param, Tensor grad, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, Tensor(d!)? trail, "
        "int step, float lr, float beta1, float beta2, float eps, float weight_decay) -> ()",
        IPEX_GUARDED(lamb_step));
    m.def(
        "lars_step(Tensor(a!) param, Tensor grad, Tensor(b!)? momentum_buf, Tensor(c!)? trail, float lr, "
        "float momentum, float eeta, float eps, float weight_decay, bool first_step) -> ()",
        IPEX_GUARDED(lars_step));
    m.def(
        "sparse_sgd_step(Tensor(a!) param, Tensor indices, Tensor values, Tensor(b!)? trail, float lr, "
        "bool maximize) -> ()",
        IPEX_GUARDED(sparse_sgd_step));
    m.def(
        "sparse_adagrad_step(Tensor(a!) param, Tensor indices, Tensor values, Tensor(b!) state_sum, "
        "Tensor(c!)? trail, int step, float lr, float lr_decay, float eps, bool maximize) -> ()",
        IPEX_GUARDED(sparse_adagrad_step));
}
