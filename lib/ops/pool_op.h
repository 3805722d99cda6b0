// ipex::max_pool2d: aten::max_pool2d's definition (kernel, stride (empty: the kernel), padding,
// dilation, ceil_mode; one value or one per dim) run by oneDNN's pooling primitive on fp32 and
// bf16 4-D inputs stored NCHW or channels-last; the output keeps the input's layout. libtorch
// 1.13 runs bf16 channels-last max pooling on a scalar path (8.5 ms where oneDNN takes 0.7 on
// an 8x24x112x112 input). Anything oneDNN is not asked to do (other dtypes and ranks, other
// strides, bf16 on a CPU without AVX-512, a window the right padding would have to cut) runs
// aten::max_pool2d itself, as do bad arguments, so errors are aten's. One difference remains:
// a NaN in a window does not make its maximum NaN (oneDNN compares past it), where aten's does.
#pragma once

#include <ATen/ATen.h>

namespace ipex::ops {

at::Tensor max_pool2d(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);

// Whether max_pool2d runs `input` with these arguments through oneDNN (the tests ask).
bool max_pool2d_uses_onednn(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);

}  // namespace ipex::ops
