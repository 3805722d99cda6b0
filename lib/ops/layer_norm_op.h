// ipex::layer_norm and ipex::add_layer_norm: layer normalization over the trailing
// `normalized_shape` dims of `input + alpha * other` in one pass over memory, with fp32
// statistics whatever the operands' dtype. fuse_layer_norm puts them where a model calls
// aten::layer_norm (alone, or on the result of aten::add), so a bf16 model normalizes its bf16
// activations without casting them to fp32 and back.
//
//   s   = other ? input + alpha * other : input   (aten::add's result: the promoted dtype of
//         input and other, broadcast as add broadcasts)
//   out = (s - mean(s)) / sqrt(var(s) + eps) * weight + bias    over the trailing dims,
//         biased variance, in s's dtype; weight and bias optional, any floating dtype.
//   layer_norm returns out; add_layer_norm returns (s, out) for graphs that use the sum too
//   (pre-norm residual streams).
// fp32/bf16 operands of one shape, on a CPU with AVX-512 (AVX512-BF16 for bf16), run the fused
// kernel; anything else runs the same definition with aten ops (layer_norm_reference).
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace ipex::ops {

at::Tensor layer_norm(const at::Tensor &input, const c10::optional<at::Tensor> &other, double alpha,
                      at::IntArrayRef normalized_shape, const c10::optional<at::Tensor> &weight,
                      const c10::optional<at::Tensor> &bias, double eps);

std::tuple<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor &input, const at::Tensor &other, double alpha,
                                                  at::IntArrayRef normalized_shape,
                                                  const c10::optional<at::Tensor> &weight,
                                                  const c10::optional<at::Tensor> &bias, double eps);

// The definition above in aten ops (the sum rounded to its dtype, statistics in fp32); the
// tests compare the fused kernel with it.
std::tuple<at::Tensor, at::Tensor> add_layer_norm_reference(const at::Tensor &input,
                                                            const c10::optional<at::Tensor> &other, double alpha,
                                                            at::IntArrayRef normalized_shape,
                                                            const c10::optional<at::Tensor> &weight,
                                                            const c10::optional<at::Tensor> &bias, double eps);

namespace layer_norm_kernel {

// One problem: `rows` rows of `cols` contiguous elements.
struct Problem {
    bool bf16_in = false, bf16_other = false, bf16_out = false;
    const void *input = nullptr;
    const void *other = nullptr;  // nullptr: no add
    float alpha = 1.f;
    const float *weight = nullptr, *bias = nullptr;  // fp32 [cols] or nullptr
    float eps = 1e-5f;
    int64_t rows = 0, cols = 0;
    void *sum = nullptr;  // s in the output dtype, or nullptr
    void *out = nullptr;
};

// Whether this CPU runs the kernel (AVX-512; AVX512-BF16 when any operand is bf16).
bool available(bool bf16);

// Runs the problem parallel over rows. Call only when available().
void run(const Problem &p);

}  // namespace layer_norm_kernel
}  // namespace ipex::ops
