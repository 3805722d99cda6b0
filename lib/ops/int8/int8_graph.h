// ipex::int8_graph(input, contexts, program): int8 convolutions (ipex::int8_op / int8_op_sum)
// that read one another's outputs and the op's input and nothing else, residual sums included,
// run by the program of ops/graph_program.h (the whole batch, or where its activations outgrow
// the cache a few images at a time, piece by piece); group_convolutions
// (passes/group_convolutions.h) puts it in place of such runs in a quantized model. A context
// that sums in place writes over its summand only where nothing later reads it and it is not
// the op's input; else over a copy of it.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/List.h>

#include <vector>

#include "ops/graph_program.h"
#include "ops/int8/int8_context.h"

namespace ipex::quant {

using Int8Chain = c10::List<c10::intrusive_ptr<Int8Context>>;

at::Tensor int8_graph(const at::Tensor &input, const Int8Chain &contexts, at::IntArrayRef program);

// ipex::int8_conv_max_pool(input, ctx, kernel_size, stride, padding, dilation, ceil_mode): an int8
// convolution and the 2-D max pooling that alone reads its output (aten::max_pool2d's arguments,
// which pools quantized values as they are: the maximum commutes with the affine map), run by
// the same program runner as [convolution, pooling], so a batch whose convolution output
// outgrows the cache (ResNet's 16x64x112x112 stem output, 12.8 MB in u8) runs a few images at a
// time and the pooling reads each part from cache; where the stem kernel runs the convolution,
// one pass of it makes and pools the output rows (stem::run_max_pooled). An fp32 input is
// quantized with the input parameters ctx was built for (the bytes ipex::quantize_per_tensor
// gives, as the rows are read where the stem kernel runs). quantize makes it
// (pool_int8_convolutions).
at::Tensor int8_conv_max_pool(const at::Tensor &input, const c10::intrusive_ptr<Int8Context> &ctx,
                              at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                              at::IntArrayRef dilation, bool ceil_mode);
// Its steps (what the profiler counts FLOPs with): the convolution's, then the pooling's.
std::vector<ops::GraphStep> int8_conv_max_pool_steps(const c10::intrusive_ptr<Int8Context> &ctx,
                                                     at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                     at::IntArrayRef padding, at::IntArrayRef dilation,
                                                     bool ceil_mode);

// The program's steps for these contexts (what the profiler counts FLOPs with).
std::vector<ops::GraphStep> int8_steps(const Int8Chain &contexts);

}  // namespace ipex::quant
