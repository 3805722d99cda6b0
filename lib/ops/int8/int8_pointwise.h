// The own int8 kernel of 1x1 convolutions (any stride, no padding, one group) on u8 or s8 inputs, for
// AVX512-VNNI CPUs: a GEMM of the output pixels (each reading a row of k input bytes,
// channels-last) by the packed
// weights, 6 pixels x 64 output channels of int32 sums in registers, the epilogue of
// int8_epilogue.h applied to them there (a residual sum reads its summand from the output
// buffer, where oneDNN's sum post-op reads it too). oneDNN 2.6's kernel for these layers runs
// the short sums of few input channels (64, 128: ResNet's widening layers with their residual
// sum) far from the VNNI peak. The zero point of the input is folded into the per-channel shift
// (zero point x the weights' sum); s8 inputs are taken as u8 (the sign bit of each broadcast
// flipped: + 128) with the zero point + 128. Int8Context times it against oneDNN per input shape.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "ops/int8/int8_epilogue.h"

namespace ipex::quant::pointwise {

struct Plan {
    int64_t k = 0, n = 0;  // input and output channels
    int64_t stride_h = 1, stride_w = 1;
    // s8 weights, [n / 64][k / 4][4 blocks of 16 channels][16 lanes][4 bytes].
    at::Tensor packed;
    std::vector<float> scale, shift;  // per output channel: y = acc x scale + shift, then the epilogue
    bool in_s8 = false;
    vnni::Epilogue epilogue;
    vnni::Folded folded;  // its constants as the kernel applies them (each shift has shift_add in it)
};

// Whether the kernel computes a convolution of these parameters: k a multiple of 4, n of 64, a
// 1x1 kernel, no padding or dilation, one group.
bool fits(int64_t k, int64_t n, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
          at::IntArrayRef dilation, int64_t groups);

// weight: s8 values [n, k, 1, 1]; bias in accumulator units (or undefined); scales per output
// channel (input scale x weight scale / output scale); epilogue.sum_scale and sum_shift relative
// to the output's scale, as oneDNN's sum post-op takes them.
Plan make_plan(const at::Tensor &weight, const at::Tensor &bias, const std::vector<float> &scales,
               at::IntArrayRef stride, bool in_s8, int64_t in_zero_point, const vnni::Epilogue &epilogue);

// src: images x h x w x k bytes; dst: images x oh x ow x n bytes (oh = (h - 1) / stride_h + 1,
// ow likewise), holding the summand's bytes when the epilogue sums. Call only when
// stem::available() (AVX512-VNNI).
void run(const Plan &plan, const uint8_t *src, int64_t images, int64_t h, int64_t w, uint8_t *dst);

}  // namespace ipex::quant::pointwise
