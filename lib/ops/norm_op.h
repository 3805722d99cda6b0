// ipex::norm_relu: an inference batch norm as a per-channel scale and shift (the folded
// weight / sqrt(running_var + eps) and bias - running_mean * that), optionally followed by a
// ReLU, over the concatenation along dim 1 of its inputs:
//
//   norm_relu([x1, x2, ...], scale, shift, relu) == relu?(cat([x1, x2, ...], 1) * scale + shift)
//
// with scale and shift broadcast along dim 1. fp32 and bf16 4-D channels-last inputs of one
// dtype and one batch and image size run an own kernel (own_kernels::run_scale_shift on
// AVX-512 CPUs, run_scale_shift_portable elsewhere: one read of each input, one write, one
// fused multiply-add in fp32, one rounding); anything else runs the same
// definition as aten ops (in fp32, fp64 for fp64 inputs), so errors are aten's. The output has
// the inputs' dtype; channels-last when the kernel runs, else the layout aten's cat gives.
#pragma once

#include <ATen/ATen.h>

namespace ipex::ops {

at::Tensor norm_relu(at::TensorList inputs, const at::Tensor &scale, const at::Tensor &shift, bool relu);

// Whether norm_relu runs `inputs` in the own kernel (the tests ask).
bool norm_relu_uses_own_kernel(at::TensorList inputs, const at::Tensor &scale, const at::Tensor &shift);

// The own kernel for inputs norm_relu_uses_own_kernel accepts: the AVX-512 one, or the portable
// one when `portable` is set or the CPU lacks AVX-512 (the tests call both).
at::Tensor norm_relu_own_kernel(at::TensorList inputs, const at::Tensor &scale, const at::Tensor &shift, bool relu,
                                bool portable);

// ipex::scale_mul: aten::mul(a, b) of two tensors. When one of them, x, is a 4-D fp32 or bf16
// channels-last tensor and the other, s, of the same dtype and dense, holds one value per
// image and channel of it (sizes [n, c, 1, 1], [1, c, 1, 1] or [c, 1, 1]: the gate of a
// squeeze-excitation block), x * s is written channels-last into x's own storage when nothing
// else holds x (no other tensor or view of it: what a TorchScript graph hands an op at the
// value's last use), else into a new tensor; bf16 by the own kernel (own_kernels::
// run_channel_scale, aten's numbers), fp32 by aten. Anything else runs aten::mul, errors
// included.
at::Tensor scale_mul(at::Tensor a, at::Tensor b);

// Whether scale_mul runs a * b in the own kernel (the tests ask).
bool scale_mul_uses_own_kernel(const at::Tensor &a, const at::Tensor &b);

}  // namespace ipex::ops
