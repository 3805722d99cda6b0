// Decode-time bf16 projections: y = x W^T (+ bias) (+ residual) for a step of a few rows
// (one or a few tokens), or the merged gate/up projection's silu(gate) * up, with an
// AVX512-BF16 kernel that reads the plain row-major [N, K] bf16 weight the oneDNN context
// already holds (no extra copy), whole or as the parts it is stored in: each thread takes one contiguous stretch of output rows, so
// its weights are one sequential stream, and every weight vector meets all the activation rows
// (VDPBF16PS) before the next is loaded. Larger steps (prefill) keep the oneDNN matmul, as do
// CPUs without AVX512-BF16 (checked at run time; the kernel is compiled with target
// attributes only, so nothing else in the binary needs the ISA).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "llm/bf16_decode_kernel.h"

namespace ipex::llm {

class Bf16Decode {
public:
    static constexpr int64_t kMaxRows = 8;  // activation rows a call takes

    // Whether this CPU runs the kernel (AVX512-BF16 and the OS's AVX-512 state).
    static bool usable();

    // weight: bf16 [N, K] contiguous (kept alive by reference, not copied); bias fp32 [N] or
    // undefined.
    Bf16Decode(at::Tensor weight, at::Tensor bias);
    // The weight as up to kernels::kMaxWeightParts parts stacked along N (each bf16 [N_p, K]
    // contiguous, read where it lies, e.g. a checkpoint's q/k/v in its mapping); bias fp32
    // [sum N_p] or undefined.
    Bf16Decode(std::vector<at::Tensor> parts, at::Tensor bias);

    // out[m, n] (fp32, row stride ldo) = x[m, :] W^T + bias[n] (+ residual[m, n], rows of
    // ldr, when residual is not null); x fp32 or bf16 [M <= kMaxRows, K], rounded to bf16.
    void run(const at::Tensor &x, float *out, int64_t ldo, const float *residual = nullptr, int64_t ldr = 0) const;
    // The merged gate/up projection (rows [0, N/2) gate, [N/2, N) up):
    // out[m, i] = silu(gate[m, i]) * up[m, i], i < N/2, rows of ldo.
    void run_silu_mul(const at::Tensor &x, float *out, int64_t ldo) const;

    // out_j[m_j, n_j] (row stride ldo_j) = x_j W_j^T + bias_j for up to kMaxRows rows of x_j
    // (fp32 or bf16 [m_j, K_j]), as run() does, all jobs' output rows split over the threads
    // together: a token's chosen experts cost one fork and join, not one per product. Jobs on
    // the same x tensor (and K) prepare it once.
    struct Job {
        const Bf16Decode *w;
        at::Tensor x;
        float *out;
        int64_t ldo;
    };
    static void decode_jobs(const std::vector<Job> &jobs);

    int64_t in_features() const { return k_; }
    int64_t out_features() const { return n_; }

private:
    // args with this weight's parts, K and bias.
    kernels::Bf16GemvArgs weight_args(kernels::Bf16GemvArgs args) const;
    // x into args as the kernel reads it: its rows rounded to bf16 into xb, padded with zeros to
    // whole vectors.
    void prepare(const at::Tensor &x, std::vector<uint16_t> &xb, kernels::Bf16GemvArgs &args) const;
    void launch(const at::Tensor &x, kernels::Bf16GemvArgs args, int64_t rows) const;
    std::vector<at::Tensor> parts_;
    at::Tensor bias_;
    int64_t n_ = 0, k_ = 0;
};

}  // namespace ipex::llm
