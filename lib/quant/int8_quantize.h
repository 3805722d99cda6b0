// ipex::quantize_per_tensor(input, scale, zero_point, dtype): fp32 to a per-tensor quint8 or
// qint8 tensor, the values aten::quantize_per_tensor gives (q = clamp(zero_point +
// nearbyint(x * (1 / scale))), the product and the inverse in fp32), but vectorized: Debian's
// libtorch has no fbgemm and quantizes one value at a time (ResNet-50's 16-image input: 10 ms
// of a 200 ms int8 forward). A 4-D input is written channels-last, the layout the int8
// convolutions read, in the same pass. +-inf and values past the int32 range go to the nearest
// bound (libtorch's scalar loop sends them through an undefined float-to-integer conversion).
#pragma once

#include <cstdint>

namespace ipex::quant::quantize_kernel {

struct Params {
    float inv_scale = 1.f;
    float lo = 0.f, hi = 255.f;  // qmin - zero_point, qmax - zero_point
    int32_t zero_point = 0;     // the output byte is the low byte of the sum: u8 or s8 alike
};

// The AVX-512 kernels below run where ops::own_kernels::available(false) says so.
// n contiguous values.
void flat_avx512(const float *src, void *dst, int64_t n, const Params &p);
// Pixels [p0, p1) of one image, channel planes of `plane` values at src (c of them), written
// channels-last at dst (the image's first byte).
void planes_to_last_avx512(const float *src, void *dst, int64_t c, int64_t plane, int64_t p0, int64_t p1,
                           const Params &p);
// ipex::dequantize's kernel: n contiguous u8 (or s8 when is_signed) values to fp32,
// float(q - zero_point) * scale, the values aten::dequantize gives.
void dequantize_avx512(const void *src, bool is_signed, float *dst, int64_t n, int32_t zero_point, float scale);
// ipex::int8_map's kernel: dst[i] = table[src[i]] for n bytes, from a table of 256 32-bit
// entries: fp32 values (dst is float *), or output bytes widened to 32 bits when bytes_out
// (dst is uint8_t *): with AVX512-VBMI's byte permutes where the CPU has them and `vbmi`.
void map_avx512(const uint8_t *src, const int32_t *table, void *dst, int64_t n, bool bytes_out, bool vbmi = true);

}  // namespace ipex::quant::quantize_kernel
