// The own int8 kernel of convolutions on few input channels (a network's stem: 3 channels of an
// image, 7x7 stride 2 in ResNet, 3x3 stride 2 in MobileNet and EfficientNet), where oneDNN 2.6
// pads each pixel's channels to 4 and its multiplies run on a quarter of zeros. On CPUs with
// AVX512-VNNI: each kernel row's taps are one run of kw x c bytes of a channels-last input row,
// taken 4 bytes at a time (the last group's surplus bytes meet zero weights), and where a row's
// last group holds one or two taps the last groups of several rows are merged into one (Plan::
// tail_groups), so a 7x7 kernel on 3 channels makes 7 x 5 + 2 groups of 4 multiplies (148 for
// 147 taps, where oneDNN makes 196; 168 without the merge). Input rows are copied once into a
// ring of padded rows (the padding is the input's zero point; an s8 input is shifted to u8
// there, its zero point with it). The accumulator is exact in int32; the epilogue is (acc +
// bias - zero point x the weights' sum) x scale in fp32 (one multiply-add), then relu, the
// output zero point, rounding to nearest even and saturation, as oneDNN's int8 convolutions
// compute it. Int8Context times it against oneDNN per input shape.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "ops/own_stem.h"
#include "ops/pool_op.h"
#include "ops/int8/int8_epilogue.h"
#include "ops/int8/int8_quantize.h"

namespace ipex::quant::stem {

// The geometry (ops/own_stem.h) and numbers of one convolution, fixed when its context is made.
struct Plan : ops::own_stem::Geometry {
    // A kernel row's kw x channels taps make ceil(kw x channels / 4) groups of 4 bytes. Where
    // the row's last group holds 1 or 2 taps (tail_bytes; 7 x 3 = 21 bytes: 1), the
    // last groups of rows_per_tail = 4 / tail_bytes rows are one group (tail_groups of them): a
    // 7x7 kernel on 3 channels makes 7 x 5 + 2 = 37 groups instead of 42, a 3x3 one 3 x 2 + 1 =
    // 7 instead of 9. Each row then reads its first row_groups groups in place; the tails come
    // from a buffer the kernel makes a row of output at a time. No merge: row_groups = all of a
    // row's groups, tail_groups = 0.
    int64_t row_groups = 0, tail_bytes = 0, rows_per_tail = 1, tail_groups = 0;
    // The groups a pixel's window makes: each tile's packed weights hold groups() x 64 x 4 bytes.
    int64_t groups() const { return kh * row_groups + tail_groups; }
    // s8 weights, [ceil(out_channels / 64)][groups()][blocks][16 lanes][4 bytes]
    // with blocks = the tile's 16-channel blocks (4, fewer in the last tile), zeros past the taps.
    at::Tensor packed;
    // Per output channel, padded to 16 with zeros: y = acc x scale + shift, then the epilogue.
    std::vector<float> scale, shift;
    vnni::Folded epilogue;  // relu and the output's type and zero point (no sum), folded
    bool in_s8 = false;
    int in_zero_point = 0;  // as given (s8: -128..127; the kernel adds 128 to it)
};

// Whether the kernel computes a convolution of these parameters: 2-D, one group, at most 4
// input channels, no dilation, every weight of a kernel row within 64 bytes.
bool fits(int64_t channels, int64_t kh, int64_t kw, int64_t groups, at::IntArrayRef dilation);

// Whether this CPU runs it (AVX512-VNNI).
bool available();

// weight: s8 values [out_channels, channels, kh, kw]; bias in accumulator units (or
// undefined); scales per output channel (input scale x weight scale / output scale).
Plan make_plan(const at::Tensor &weight, const at::Tensor &bias, const std::vector<float> &scales,
               at::IntArrayRef stride, at::IntArrayRef padding, bool relu, bool in_s8, int64_t in_zero_point,
               bool out_s8, int64_t out_zero_point);

// src: n x h x w x channels bytes (channels-last, dense); dst: n x oh x ow x out_channels.
// Call only when available().
void run(const Plan &plan, const uint8_t *src, int64_t n, int64_t h, int64_t w, uint8_t *dst, int64_t oh,
         int64_t ow);

// The input of run_max_pooled: bytes as run() reads them, or fp32 values quantized as the rows
// are copied into the ring (quantize_kernel's loops with `quantize`: the bytes
// ipex::quantize_per_tensor gives, s8 ones as u8 with the zero point + 128), n x channels x h x
// w planes (NCHW, dense) or channels-last.
struct Source {
    const uint8_t *bytes = nullptr;
    const float *floats = nullptr;
    bool planes = false;
    quantize_kernel::Params quantize;
};

// The convolution (output oh x ow) and a 2-D max pooling of its output by `win` (aten's windows,
// pooled sizes poh x pow) in one pass: each thread makes the
// output rows its pooled rows read into a ring of rows and pools them as they are made, so the
// convolution's output (ResNet-50's 12.8 MB at batch 16) stays in the core's L1 and L2 instead of
// going to memory and back; an fp32 input is quantized row by row as the convolution reads it
// (no quantized copy of the batch made first). dst: n x poh x pow x out_channels. Call only when
// available().
void run_max_pooled(const Plan &plan, const Source &src, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow,
                    const ops::PoolWindow &win, int64_t poh, int64_t pow, uint8_t *dst);

}  // namespace ipex::quant::stem
