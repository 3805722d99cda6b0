// The fused optimizer steps (train_ops.h). Each element is updated by the scalar formula of
// torch.optim's single-tensor step in aten's order of operations and rounding: add with an alpha
// and addcmul are fused multiply-adds as aten's vectorized kernels compute them (value * t1 then
// one fma), every other op rounds on its own (this file is built without contraction), and each
// double hyper-parameter is rounded to float where aten rounds it.
#include "train/train_ops.h"

#include <ATen/Parallel.h>

#include <c10/util/BFloat16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "ops/op_errors.h"

namespace ipex::train {
namespace {

constexpr int64_t kGrain = 16384;  // elements per parallel chunk

// Where one step reads and writes: the master weight as fp32 or as bf16 top + int16 trail.
struct Master {
    float *fp32 = nullptr;
    uint16_t *top = nullptr;
    uint16_t *trail = nullptr;

    float load(int64_t i) const {
        if (fp32) return fp32[i];
        const uint32_t bits = (static_cast<uint32_t>(top[i]) << 16) | trail[i];
        float value;
        std::memcpy(&value, &bits, sizeof(value));
        return value;
    }
    void store(int64_t i, float value) const {
        if (fp32) {
            fp32[i] = value;
            return;
        }
        uint32_t bits;
        std::memcpy(&bits, &value, sizeof(bits));
        top[i] = static_cast<uint16_t>(bits >> 16);
        trail[i] = static_cast<uint16_t>(bits & 0xffffu);
    }
};

// The gradient, fp32 or bf16.
struct Grad {
    const float *fp32 = nullptr;
    const c10::BFloat16 *bf16 = nullptr;
    float load(int64_t i) const { return fp32 ? fp32[i] : static_cast<float>(bf16[i]); }
};

void check_same_shape(const char *op, const at::Tensor &param, const at::Tensor &other, const char *name) {
    IPEX_CHECK_INPUT(other.sizes() == param.sizes(), op, ": ", name, " has shape ", other.sizes(),
                     " but the parameter has ", param.sizes());
    IPEX_CHECK_INPUT(other.is_contiguous(), op, ": ", name, " must be contiguous (call .contiguous() on it)");
    IPEX_CHECK_INPUT(other.device().is_cpu(), op, ": ", name, " must be a CPU tensor, not on ", other.device());
}

void check_state(const char *op, const at::Tensor &param, const at::Tensor &state, const char *name) {
    IPEX_CHECK_INPUT(state.defined(), op, ": ", name, " is required here");
    IPEX_CHECK_INPUT(state.scalar_type() == at::kFloat, op, ": ", name, " must be float32 (fp32 optimizer state), not ",
                     state.scalar_type());
    check_same_shape(op, param, state, name);
}

Master master_of(const char *op, at::Tensor &param, const c10::optional<at::Tensor> &trail) {
    IPEX_CHECK_INPUT(param.defined(), op, ": the parameter is undefined");
    IPEX_CHECK_INPUT(param.device().is_cpu(), op, ": the parameter must be a CPU tensor, not on ", param.device());
    IPEX_CHECK_INPUT(param.is_contiguous(), op, ": the parameter must be contiguous");
    const bool has_trail = trail.has_value() && trail->defined();
    Master master;
    if (param.scalar_type() == at::kFloat) {
        IPEX_CHECK_INPUT(!has_trail, op, ": a trail goes with a bf16 parameter (the top 16 bits of its master), "
                                         "but the parameter is float32");
        master.fp32 = param.data_ptr<float>();
        return master;
    }
    IPEX_CHECK_INPUT(param.scalar_type() == at::kBFloat16, op, ": the parameter must be float32, or bfloat16 with "
                     "its int16 trail (split master weight), not ", param.scalar_type());
    IPEX_CHECK_INPUT(has_trail, op, ": a bfloat16 parameter needs its trail (int16, the low 16 bits of the fp32 "
                                    "master weight)");
    IPEX_CHECK_INPUT(trail->scalar_type() == at::kShort, op, ": the trail must be int16, not ", trail->scalar_type());
    check_same_shape(op, param, *trail, "the trail");
    master.top = reinterpret_cast<uint16_t *>(param.data_ptr<at::BFloat16>());
    master.trail = reinterpret_cast<uint16_t *>(trail->data_ptr<int16_t>());
    return master;
}

Grad grad_of(const char *op, const at::Tensor &param, const at::Tensor &grad) {
    IPEX_CHECK_INPUT(grad.defined(), op, ": the gradient is undefined");
    IPEX_CHECK_INPUT(!grad.is_sparse(), op, ": sparse gradients are not supported; use a dense gradient");
    check_same_shape(op, param, grad, "the gradient");
    Grad g;
    if (grad.scalar_type() == at::kFloat) {
        g.fp32 = grad.data_ptr<float>();
    } else {
        IPEX_CHECK_INPUT(grad.scalar_type() == at::kBFloat16, op, ": the gradient must be float32 or bfloat16, not ",
                         grad.scalar_type());
        g.bf16 = grad.data_ptr<at::BFloat16>();
    }
    return g;
}

// torch.maximum: NaN wins.
float maximum(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
    return a > b ? a : b;
}

void adam_like_step(const char *op, bool decoupled, at::Tensor &param, const at::Tensor &grad,
                    at::Tensor &exp_avg, at::Tensor &exp_avg_sq, const c10::optional<at::Tensor> &max_exp_avg_sq,
                    const c10::optional<at::Tensor> &trail, int64_t step, double lr, double beta1, double beta2,
                    double eps, double weight_decay, bool amsgrad, bool maximize) {
    const Master master = master_of(op, param, trail);
    const Grad g = grad_of(op, param, grad);
    check_state(op, param, exp_avg, "exp_avg");
    check_state(op, param, exp_avg_sq, "exp_avg_sq");
    float *max_sq = nullptr;
    if (amsgrad) {
        IPEX_CHECK_INPUT(max_exp_avg_sq.has_value(), op, ": amsgrad needs max_exp_avg_sq");
        check_state(op, param, *max_exp_avg_sq, "max_exp_avg_sq");
        max_sq = max_exp_avg_sq->data_ptr<float>();
    }
    IPEX_CHECK_INPUT(step >= 1, op, ": step counts from 1, got ", step);
    float *m = exp_avg.data_ptr<float>();
    float *v = exp_avg_sq.data_ptr<float>();

    const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
    const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
    const float decay = static_cast<float>(1 - lr * weight_decay);
    const float l2 = static_cast<float>(weight_decay);
    const float beta1_f = static_cast<float>(beta1);
    const float one_minus_beta1 = static_cast<float>(1 - beta1);
    const float beta2_f = static_cast<float>(beta2);
    const float one_minus_beta2 = static_cast<float>(1 - beta2);
    const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    const float eps_f = static_cast<float>(eps);
    const float neg_step_size = static_cast<float>(-(lr / bias_correction1));
    const bool has_decay = weight_decay != 0;

    at::parallel_for(0, param.numel(), kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            float p = master.load(i);
            float d = g.load(i);
            if (maximize) d = -d;
            if (has_decay) {
                if (decoupled) {
                    p = p * decay;
                } else {
                    d = std::fma(p, l2, d);
                }
            }
            const float mi = std::fma(d, one_minus_beta1, m[i] * beta1_f);
            const float vi = std::fma(one_minus_beta2 * d, d, v[i] * beta2_f);
            m[i] = mi;
            v[i] = vi;
            float second = vi;
            if (max_sq) {
                second = maximum(max_sq[i], vi);
                max_sq[i] = second;
            }
            const float denom = std::sqrt(second) / bias_correction2_sqrt + eps_f;
            master.store(i, p + neg_step_size * mi / denom);
        }
    });
}

}  // namespace

void sgd_step(at::Tensor param, const at::Tensor &grad, const c10::optional<at::Tensor> &momentum_buf,
              const c10::optional<at::Tensor> &trail, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov, bool maximize, bool first_step) {
    const char *op = "ipex::sgd_step";
    const Master master = master_of(op, param, trail);
    const Grad g = grad_of(op, param, grad);
    float *buf = nullptr;
    if (momentum != 0) {
        IPEX_CHECK_INPUT(momentum_buf.has_value(), op, ": momentum != 0 needs momentum_buf");
        check_state(op, param, *momentum_buf, "momentum_buf");
        buf = momentum_buf->data_ptr<float>();
    }
    const bool has_decay = weight_decay != 0;
    const float decay = static_cast<float>(weight_decay);
    const float momentum_f = static_cast<float>(momentum);
    const float one_minus_dampening = static_cast<float>(1 - dampening);
    const float neg_lr = static_cast<float>(-lr);

    at::parallel_for(0, param.numel(), kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const float p = master.load(i);
            float d = g.load(i);
            if (maximize) d = -d;
            if (has_decay) d = std::fma(p, decay, d);
            if (buf) {
                const float b = first_step ? d : std::fma(d, one_minus_dampening, buf[i] * momentum_f);
                buf[i] = b;
                d = nesterov ? std::fma(b, momentum_f, d) : b;
            }
            master.store(i, std::fma(d, neg_lr, p));
        }
    });
}

void adagrad_step(at::Tensor param, const at::Tensor &grad, at::Tensor state_sum,
                  const c10::optional<at::Tensor> &trail, int64_t step, double lr, double lr_decay,
                  double weight_decay, double eps, bool maximize) {
    const char *op = "ipex::adagrad_step";
    const Master master = master_of(op, param, trail);
    const Grad g = grad_of(op, param, grad);
    check_state(op, param, state_sum, "state_sum");
    IPEX_CHECK_INPUT(step >= 1, op, ": step counts from 1, got ", step);
    float *sum = state_sum.data_ptr<float>();
    const bool has_decay = weight_decay != 0;
    const float decay = static_cast<float>(weight_decay);
    const float eps_f = static_cast<float>(eps);
    const float neg_clr = static_cast<float>(-(lr / (1 + static_cast<double>(step - 1) * lr_decay)));

    at::parallel_for(0, param.numel(), kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const float p = master.load(i);
            float d = g.load(i);
            if (maximize) d = -d;
            if (has_decay) d = std::fma(p, decay, d);
            const float s = std::fma(d, d, sum[i]);
            sum[i] = s;
            const float std_dev = std::sqrt(s) + eps_f;
            master.store(i, p + neg_clr * d / std_dev);
        }
    });
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
