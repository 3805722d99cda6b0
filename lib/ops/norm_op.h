// ipex::norm_relu: an inference batch norm as a per-channel scale and shift (the folded
// weight / sqrt(running_var + eps) and bias - running_mean * that), optionally followed by a
// ReLU, over the concatenation along dim 1 of its inputs:
//
//   norm_relu([x1, x2, ...], scale, shift, relu) == relu?(cat([x1, x2, ...], 1) * scale + shift)
//
// with scale and shift broadcast along dim 1. fp32 and bf16 4-D channels-last inputs of one
// dtype and one batch and image size run the own kernel (own_kernels::run_scale_shift: one
// read of each input, one write, fp32 arithmetic, one rounding); anything else runs the same
// definition as aten ops (in fp32, fp64 for fp64 inputs), so errors are aten's. The output has
// the inputs' dtype; channels-last when the kernel runs, else the layout aten's cat gives.
#pragma once

#include <ATen/ATen.h>

namespace ipex::ops {

at::Tensor norm_relu(at::TensorList inputs, const at::Tensor &scale, const at::Tensor &shift, bool relu);

// Whether norm_relu runs `inputs` in the own kernel (the tests ask).
bool norm_relu_uses_own_kernel(at::TensorList inputs, const at::Tensor &scale, const at::Tensor &shift);

}  // namespace ipex::ops
