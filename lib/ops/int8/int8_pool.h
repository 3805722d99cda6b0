// ipex::int8_max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode): aten::max_pool2d
// (its schema, sizes and values) with its own loop for a channels-last per-tensor quint8/qint8
// 4-D input on a CPU with AVX-512: an output row's window rows reduced to their maximum, then
// each window's maximum along it, 64 channels at a time (a masked tail), where aten's quantized
// kernel runs vectors of 32 or 64 channels and leaves the rest to a scalar loop (4x24x112x112
// u8: 1.37 ms against 0.03 ms). Any other input goes
// to aten::max_pool2d. quantize writes it for every aten::max_pool2d of an int8 model
// (int8_grouping.h) and int8_conv_max_pool pools with it.
#pragma once

#include <ATen/ATen.h>

#include "ops/pool_op.h"

namespace ipex::quant {

// The most window rows int8_max_pool2d's own loop takes (taller windows go to aten).
constexpr int64_t kMaxPoolRows = 64;

// One output row of a 2-D max pooling on channels-last int8 rows (a CPU with AVX-512 BW:
// ops::own_kernels::available): rows[0 .. count) are the window's rows that lie inside the
// input, each w pixels of c bytes; out (ow pixels of c bytes) gets each window's maximum over
// those rows at the columns x * stride - padding + kx * dilation inside 0 .. w - 1 (win's
// second axis), in u8 or s8 order. How int8_max_pool2d pools a row and the stem kernel pools
// its output rows as it makes them (int8_stem.h).
void max_pool_row(const uint8_t *const *rows, int64_t count, int64_t w, int64_t c, const ops::PoolWindow &win,
                  int64_t ow, bool is_signed, uint8_t *out);

at::Tensor int8_max_pool2d(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);

// ipex::int8_adaptive_avg_pool2d(input, output_size): aten::adaptive_avg_pool2d (its schema and
// values) with its own loop for the global pool (output 1x1) of a channels-last per-tensor
// quint8/qint8 4-D input on a CPU with AVX-512: each channel's sum of its pixels in int32 less
// the zero point's share, times input scale / output scale / pixels in fp32, rounded to nearest
// even, plus the zero point (aten's quantized kernel: 0.20 ms for ResNet-50's 16x2048x7x7).
// Any other input or size goes to aten. quantize writes it for every aten::adaptive_avg_pool2d
// of an int8 value.
at::Tensor int8_adaptive_avg_pool2d(const at::Tensor &input, at::IntArrayRef output_size);

}  // namespace ipex::quant
