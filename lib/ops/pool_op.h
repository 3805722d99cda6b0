// ipex::max_pool2d: aten::max_pool2d's definition (kernel, stride (empty: the kernel), padding,
// dilation, ceil_mode; one value or one per dim) on fp32 and bf16 4-D inputs stored NCHW or
// channels-last; the output keeps the input's layout. On AVX-512 CPUs oneDNN's pooling
// primitive runs it: libtorch 1.13 runs bf16 channels-last max pooling on a scalar path (8.5 ms
// where oneDNN takes 0.7 on an 8x24x112x112 input). One difference remains there: a NaN in a
// window does not make its maximum NaN (oneDNN compares past it), where aten's does. On other
// CPUs channels-last inputs run the own portable kernel (own_kernels::run_max_pool_portable,
// aten's values, NaN where aten's is; 8x192x28x28 3x3 fp32: aten 2.8 ms), NCHW ones aten. Anything else
// (other dtypes and ranks, other strides, on AVX-512 CPUs a window the right padding would have
// to cut) runs aten::max_pool2d itself, as do bad arguments, so errors are aten's.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <vector>

namespace ipex::ops {

// ipex::spatial_mean: aten::mean(input, dim, keepdim) where dim names the two spatial dims of a
// 4-D input (the global average pool): fp32 and bf16 channels-last inputs run the own kernel
// (own_kernels::run_spatial_mean on AVX-512 CPUs, run_spatial_mean_portable elsewhere; sums
// in fp32, one rounding, as aten's), anything else
// runs aten::mean itself, as do bad arguments, so errors are aten's. The output is [n, c, 1, 1]
// (keepdim) or [n, c], dense, the input's dtype.
at::Tensor spatial_mean(const at::Tensor &input, at::IntArrayRef dim, bool keepdim);

// Whether `dim` names the two spatial dims of a 4-D tensor (2 and 3, either order, negative or
// not): the means spatial_mean is for (replace_pooling asks at optimize time).
bool spatial_mean_dims(at::IntArrayRef dim);

// Whether spatial_mean runs `input` over `dim` in the own kernel (the tests ask).
bool spatial_mean_uses_own_kernel(const at::Tensor &input, at::IntArrayRef dim);
// spatial_mean(input, {2, 3}, keepdim) in the own kernel's portable build on any CPU (the tests
// ask: AVX-512 CPUs run the other build); only for inputs spatial_mean_uses_own_kernel takes.
at::Tensor spatial_mean_portable(const at::Tensor &input, bool keepdim);

at::Tensor max_pool2d(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);

// max_pool2d's arguments per dim (H, W) as aten takes them: a list of one value stands for both
// dims, an empty stride is the kernel size; nullopt for a list of another length or values aten
// rejects (a size below 1, padding above half the kernel).
struct PoolWindow {
    std::array<int64_t, 2> kernel, stride, padding, dilation;
};
std::optional<PoolWindow> pool_window(at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                      at::IntArrayRef dilation);
// aten's pooled size of one dim: floor or ceil of the window count, the last window starting
// inside the input or its left padding; 0 when no window fits.
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

// The output sizes of max_pool2d on a channels-last fp32 or bf16 4-D input with arguments aten
// takes (its output is then channels-last too), else nullopt.
std::optional<std::vector<int64_t>> max_pool2d_sizes(const at::Tensor &input, at::IntArrayRef kernel_size,
                                                     at::IntArrayRef stride, at::IntArrayRef padding,
                                                     at::IntArrayRef dilation, bool ceil_mode);
// max_pool2d of such an input written into `out`: channels-last and dense, of those sizes and the
// input's dtype (how a batch's pooling is written part by part; ops/conv_chain_op.h). The same
// values as max_pool2d of the same images.
void max_pool2d_into(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, const at::Tensor &out);

// Which code max_pool2d runs for `input` with these arguments (the tests ask).
enum class PoolPath { onednn, own, aten };
PoolPath max_pool2d_path(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);
// The own portable kernel on a channels-last fp32 or bf16 input whatever the CPU (max_pool2d takes
// it only without AVX-512; the tests call it on every CPU); throws on inputs it does not take.
at::Tensor max_pool2d_own_kernel(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);

}  // namespace ipex::ops
