// What every fused step does around its element loops (train_ops.h): check the caller's
// tensors and turn them into the loops' buffers, run a loop over the elements in parallel
// chunks, and bump the versions of the tensors it wrote (as an in-place torch op does, so
// autograd refuses a graph that saved the parameter before the step).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <c10/util/Optional.h>

#include <cstdint>
#include <initializer_list>

#include "base/isa.h"
#include "train/step_kernels.h"

namespace ipex::train {

constexpr int64_t kGrain = 16384;  // elements per parallel chunk

// Checks that `other` (named `name` in errors) has the parameter's shape and is a contiguous
// CPU tensor.
void check_same_shape(const char *op, const at::Tensor &param, const at::Tensor &other, const char *name);

// The fp32 state tensor `state` of the parameter, checked.
float *state_of(const char *op, const at::Tensor &param, const at::Tensor &state, const char *name);

// The parameter (fp32, or bf16 with its int16 trail), checked; no gradient yet.
StepBuffers master_of(const char *op, const at::Tensor &param, const c10::optional<at::Tensor> &trail);

// master_of and the dense gradient (fp32 or bf16, the parameter's shape), checked.
StepBuffers buffers_of(const char *op, const at::Tensor &param, const at::Tensor &grad,
                       const c10::optional<at::Tensor> &trail);

// Bumps the version counter of each defined tensor the step wrote.
void bump_versions(std::initializer_list<const at::Tensor *> written);
void bump_versions(const at::Tensor &param, const c10::optional<at::Tensor> &trail,
                   std::initializer_list<const at::Tensor *> state);

// Runs `range` (the AVX2 build where the CPU has it) over the elements in parallel chunks.
template <typename Args>
void run(void (*ref_range)(const Args &, int64_t, int64_t), void (*avx2_range)(const Args &, int64_t, int64_t),
         const Args &args, int64_t numel) {
    const auto range = isa::avx2_fma() ? avx2_range : ref_range;
    at::parallel_for(0, numel, kGrain, [&](int64_t begin, int64_t end) { range(args, begin, end); });
}

}  // namespace ipex::train
