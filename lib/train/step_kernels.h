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

// Lamb's step in two passes: lamb_moments_range updates exp_avg and exp_avg_sq and returns the
// squared norms of the master and of the update u = m / bc1 / (sqrt(v / bc2) + eps) + wd * p;
// lamb_update_range computes u again from the stored moments (the same bits) and adds
// neg_rate * u (neg_rate = -lr * trust ratio) to the master.
struct LambArgs {
    StepBuffers io;
    float *exp_avg = nullptr, *exp_avg_sq = nullptr;
    bool has_decay = false;
    float beta1 = 0, one_minus_beta1 = 0, beta2 = 0, one_minus_beta2 = 0;
    float bias_correction1 = 1, bias_correction2 = 1, eps = 0, decay = 0, neg_rate = 0;
};

// Two sums of squares over a range, in double: each square of a float is exact in double and
// the sum runs over eight lanes (i mod 8) added in order at the end, so a range gives the same
// bits in both builds.
struct SquareSums {
    double first = 0, second = 0;
};

// Sparse row steps: rows `indices[k]` of the master (row length `row`) take the gradient row
// `k` of `values`. SGD applies the rows one after the other in their order (duplicates too,
// as torch's index_add_); Adagrad first sums the rows of each distinct index (`order` lists
// the entries in the order torch's coalesce sorts them; `starts` where each distinct index
// begins in it).
struct SparseRows {
    StepBuffers io;  // io.grad / io.grad_bf16: the values, nnz x row
    const int64_t *indices = nullptr;
    int64_t nnz = 0, row = 0;
};

struct SparseSgdArgs {
    SparseRows rows;
    float neg_lr = 0;  // maximize: +lr
};

struct SparseAdagradArgs {
    SparseRows rows;
    const int64_t *order = nullptr, *starts = nullptr;  // starts has one more entry than distinct indices
    float *sum = nullptr;
    bool maximize = false;
    float eps = 0, neg_clr = 0;
};

// Elements [begin, end) of one step. The sparse steps go by rows: SGD applies the entries whose
// index mod `lanes` is in [lane_begin, lane_end), in order (so one thread owns each row);
// Adagrad the distinct indices [begin, end).
#define IPEX_TRAIN_STEP_RANGES                                                                  \
    void sgd_range(const SgdArgs &args, int64_t begin, int64_t end);                            \
    void adagrad_range(const AdagradArgs &args, int64_t begin, int64_t end);                    \
    void adam_range(const AdamArgs &args, int64_t begin, int64_t end);                          \
    SquareSums lamb_moments_range(const LambArgs &args, int64_t begin, int64_t end);            \
    void lamb_update_range(const LambArgs &args, int64_t begin, int64_t end);                   \
    SquareSums norms_range(const StepBuffers &io, int64_t begin, int64_t end);                  \
    void sparse_sgd_rows(const SparseSgdArgs &args, int64_t lanes, int64_t lane_begin,          \
                         int64_t lane_end);                                                     \
    void sparse_adagrad_rows(const SparseAdagradArgs &args, int64_t begin, int64_t end);

namespace ref {
IPEX_TRAIN_STEP_RANGES
}  // namespace ref

namespace avx2 {
IPEX_TRAIN_STEP_RANGES
}  // namespace avx2

#undef IPEX_TRAIN_STEP_RANGES

}  // namespace ipex::train
