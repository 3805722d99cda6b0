// The element loops of the fused steps (train_ops.h), built twice: portable (step_kernels.cpp)
// and for AVX2 + FMA (step_kernels_avx2.cpp, called only after isa::avx2_fma()). Both builds
// compute the same bits: the same operations in the same order, every fused multiply-add an
// explicit std::fma (hardware in the AVX2 build, libm's exact one in the portable build), no
// contraction, correctly rounded sqrt and division.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace ipex::train {

// What one step reads and writes: the master weight as fp32 (`master`) or as bf16 top + int16
// trail (`top`, `trail`), the gradient as fp32 (`grad`) or bf16 (`grad_bf16`).
struct StepBuffers {
    float *master = nullptr;
    uint16_t *top = nullptr;
    uint16_t *trail = nullptr;
    const float *grad = nullptr;
    const c10::BFloat16 *grad_bf16 = nullptr;
};

// The hyper-parameters as aten rounds them to float.
struct SgdArgs {
    StepBuffers io;
    float *momentum_buf = nullptr;  // null when momentum == 0
    bool has_decay = false, nesterov = false, maximize = false, first_step = false;
    float decay = 0, momentum = 0, one_minus_dampening = 1, neg_lr = 0;
};

struct AdagradArgs {
    StepBuffers io;
    float *sum = nullptr;
    bool has_decay = false, maximize = false;
    float decay = 0, eps = 0, neg_clr = 0;
};

struct AdamArgs {
    StepBuffers io;
    float *exp_avg = nullptr, *exp_avg_sq = nullptr, *max_exp_avg_sq = nullptr;  // the last null without amsgrad
    bool decoupled = false, has_decay = false, maximize = false;
    float decay = 1, l2 = 0, beta1 = 0, one_minus_beta1 = 0, beta2 = 0, one_minus_beta2 = 0;
    float bias_correction2_sqrt = 1, eps = 0, neg_step_size = 0;
};

// Elements [begin, end) of one step.
namespace ref {
void sgd_range(const SgdArgs &args, int64_t begin, int64_t end);
void adagrad_range(const AdagradArgs &args, int64_t begin, int64_t end);
void adam_range(const AdamArgs &args, int64_t begin, int64_t end);
}  // namespace ref

namespace avx2 {
void sgd_range(const SgdArgs &args, int64_t begin, int64_t end);
void adagrad_range(const AdagradArgs &args, int64_t begin, int64_t end);
void adam_range(const AdamArgs &args, int64_t begin, int64_t end);
}  // namespace avx2

}  // namespace ipex::train
