// Lamb and Lars (train_ops.h): steps scaled by a trust ratio of norms over the whole parameter.
// The norms are sums of exact double squares over fixed blocks of kNormBlock elements, added
// block after block, so they do not depend on the number of threads or the build (and the split
// step on bf16 gradients gives the fp32 step's bits); the ratio is computed in double and the
// learning rate it scales rounded to float once.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/op_errors.h"
#include "train/step_args.h"
#include "train/step_kernels.h"
#include "train/train_ops.h"

namespace ipex::train {
namespace {

constexpr int64_t kNormBlock = 16384;  // a multiple of the 8 lanes of SquareSums

template <typename Range>
SquareSums sum_blocks(int64_t numel, const Range &range) {
    const int64_t blocks = (numel + kNormBlock - 1) / kNormBlock;
    std::vector<SquareSums> partial(static_cast<size_t>(blocks));
    at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
        for (int64_t b = first; b < last; ++b) partial[b] = range(b * kNormBlock, std::min(numel, (b + 1) * kNormBlock));
    });
    SquareSums total;
    for (const SquareSums &p : partial) {
        total.first += p.first;
        total.second += p.second;
    }
    return total;
}

void check_hyper(const char *op, bool ok, const char *what, double value) {
    IPEX_CHECK_INPUT(ok, op, ": ", what, ", got ", value);
}

}  // namespace

void lamb_step(at::Tensor param, const at::Tensor &grad, at::Tensor exp_avg, at::Tensor exp_avg_sq,
               const c10::optional<at::Tensor> &trail, int64_t step, double lr, double beta1, double beta2, double eps,
               double weight_decay) {
    const char *op = "ipex::lamb_step";
    LambArgs a;
    a.io = buffers_of(op, param, grad, trail);
    a.exp_avg = state_of(op, param, exp_avg, "exp_avg");
    a.exp_avg_sq = state_of(op, param, exp_avg_sq, "exp_avg_sq");
    IPEX_CHECK_INPUT(step >= 1, op, ": step counts from 1, got ", step);
    check_hyper(op, lr >= 0, "lr must be >= 0", lr);
    check_hyper(op, eps >= 0, "eps must be >= 0", eps);
    check_hyper(op, beta1 >= 0 && beta1 < 1, "beta1 must be in [0, 1)", beta1);
    check_hyper(op, beta2 >= 0 && beta2 < 1, "beta2 must be in [0, 1)", beta2);
    check_hyper(op, weight_decay >= 0, "weight_decay must be >= 0", weight_decay);
    a.has_decay = weight_decay != 0;
    a.beta1 = static_cast<float>(beta1);
    a.one_minus_beta1 = static_cast<float>(1 - beta1);
    a.beta2 = static_cast<float>(beta2);
    a.one_minus_beta2 = static_cast<float>(1 - beta2);
    a.bias_correction1 = static_cast<float>(1 - std::pow(beta1, static_cast<double>(step)));
    a.bias_correction2 = static_cast<float>(1 - std::pow(beta2, static_cast<double>(step)));
    a.eps = static_cast<float>(eps);
    a.decay = static_cast<float>(weight_decay);
    const bool avx2 = isa::avx2_fma();
    const auto moments = avx2 ? &avx2::lamb_moments_range : &ref::lamb_moments_range;
    const SquareSums norms =
        sum_blocks(param.numel(), [&](int64_t begin, int64_t end) { return moments(a, begin, end); });
    const double weight_norm = std::sqrt(norms.first), update_norm = std::sqrt(norms.second);
    const double trust_ratio = weight_norm > 0 && update_norm > 0 ? weight_norm / update_norm : 1.0;
    a.neg_rate = static_cast<float>(-(lr * trust_ratio));
    run(&ref::lamb_update_range, &avx2::lamb_update_range, a, param.numel());
    bump_versions(param, trail, {&exp_avg, &exp_avg_sq});
}

void lars_step(at::Tensor param, const at::Tensor &grad, const c10::optional<at::Tensor> &momentum_buf,
               const c10::optional<at::Tensor> &trail, double lr, double momentum, double eeta, double eps,
               double weight_decay, bool first_step) {
    const char *op = "ipex::lars_step";
    SgdArgs a;
    a.io = buffers_of(op, param, grad, trail);
    if (momentum != 0) {
        IPEX_CHECK_INPUT(momentum_buf.has_value(), op, ": momentum != 0 needs momentum_buf");
        a.momentum_buf = state_of(op, param, *momentum_buf, "momentum_buf");
    }
    check_hyper(op, weight_decay >= 0, "weight_decay must be >= 0", weight_decay);
    check_hyper(op, eps >= 0, "eps must be >= 0", eps);
    check_hyper(op, eeta > 0, "eeta (the trust coefficient) must be > 0", eeta);
    const bool avx2 = isa::avx2_fma();
    const auto norms_of = avx2 ? &avx2::norms_range : &ref::norms_range;
    const SquareSums norms =
        sum_blocks(param.numel(), [&](int64_t begin, int64_t end) { return norms_of(a.io, begin, end); });
    const double weight_norm = std::sqrt(norms.first), grad_norm = std::sqrt(norms.second);
    const double trust_ratio = weight_norm > 0 && grad_norm > 0
                                   ? eeta * weight_norm / (grad_norm + weight_decay * weight_norm + eps)
                                   : 1.0;
    a.has_decay = weight_decay != 0;
    a.first_step = first_step;
    a.decay = static_cast<float>(weight_decay);
    a.momentum = static_cast<float>(momentum);
    a.neg_lr = static_cast<float>(-(lr * trust_ratio));
    run(&ref::sgd_range, &avx2::sgd_range, a, param.numel());
    bump_versions(param, trail, {momentum != 0 ? &*momentum_buf : nullptr});
}

}  // namespace ipex::train
