// ipex::quantize_per_tensor(input, scale, zero_point, dtype): fp32 to a per-tensor quint8 or
// qint8 tensor, the values aten::quantize_per_tensor gives (q = clamp(zero_point +
// nearbyint(x * (1 / scale))), the product and the inverse in fp32), but vectorized: Debian's
// libtorch has no fbgemm and quantizes one value at a time (ResNet-50's 16-image input: 10 ms
// of a 200 ms int8 forward). A 4-D input is written channels-last, the layout the int8
// convolutions read, in the same pass. +-inf and values past the int32 range go to the nearest
// bound (libtorch's scalar loop sends them through an undefined float-to-integer conversion).
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

namespace ipex::quant::quantize_kernel {

struct Params {
    float inv_scale = 1.f;
    float lo = 0.f, hi = 255.f;  // qmin - zero_point, qmax - zero_point
    int32_t zero_point = 0;     // the output byte is the low byte of the sum: u8 or s8 alike
};

// The parameters of quantizing to s8 (is_signed) or u8 with this scale and zero point.
inline Params params_for(double scale, int64_t zero_point, bool is_signed) {
    const int64_t qmin = is_signed ? -128 : 0;
    return Params{1.0f / static_cast<float>(scale), static_cast<float>(qmin - zero_point),
                  static_cast<float>(qmin + 255 - zero_point), static_cast<int32_t>(zero_point)};
}

// One value as the AVX-512 kernels compute it (the portable loops' quantize).
inline uint8_t quantize_value(float x, const Params &p) {
    float r = std::nearbyint(x * p.inv_scale);
    r = r > p.hi ? p.hi : r;
    r = r >= p.lo ? r : p.lo;  // NaN to lo
    return static_cast<uint8_t>(static_cast<int32_t>(r) + p.zero_point);
}

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
// (dst is uint8_t *): with AVX512-VBMI's byte permutes where the CPU has them and `vbmi` (fp32
// values as four byte planes, 64 at a time). The kernels below take `vbmi` the same way.
void map_avx512(const uint8_t *src, const int32_t *table, void *dst, int64_t n, bool bytes_out, bool vbmi = true);
// ipex::int8_cat_scale_shift's kernel: `pixels` rows of `channels` u8 (s8 when is_signed)
// values, src_stride bytes apart, dequantized as dequantize_avx512 does, times scale[c] plus
// shift[c], relu'd when `relu`, quantized with `out` into rows dst_stride bytes apart.
struct ScaleShift {
    bool is_signed = false;
    int32_t zero_point = 0;
    float scale = 1.f;                      // the input's
    const float *channel_scale = nullptr;  // per channel, `channels` of each
    const float *channel_shift = nullptr;
    bool relu = false;
    Params out;
};
void scale_shift_avx512(const uint8_t *src, int64_t src_stride, uint8_t *dst, int64_t dst_stride, int64_t pixels,
                        int64_t channels, const ScaleShift &p);
// What the bytes of ipex::int8_map_mean and ipex::int8_map_gate stand for: table[b] (256 fp32
// values as 32-bit words), or, when `affine`, float(q - zero_point) * scale (a dequantize, the
// same values computed instead of looked up).
struct ByteValues {
    const int32_t *table = nullptr;
    // The table as word_planes gives it, for the VBMI lookups; null: the kernel makes them.
    const uint8_t *planes = nullptr;
    bool affine = false;
    bool is_signed = false;
    int32_t zero_point = 0;
    float scale = 1.f;
};
// A table of 256 32-bit words as four planes of 256 bytes (plane k: byte k of each word), the
// form the VBMI lookups read: 4 x 256 bytes at planes.
inline void word_planes(const int32_t *table, uint8_t *planes) {
    for (int b = 0; b < 256; ++b)
        for (int k = 0; k < 4; ++k)
            planes[256 * k + b] = static_cast<uint8_t>(static_cast<uint32_t>(table[b]) >> (8 * k));
}
// ipex::int8_map_mean's kernel: sums[c] = the fp32 sum of the values of src[p * stride + c]
// over pixels p = 0, 1, ... in that order (one add after another, as the portable loop sums),
// for c < channels <= 64.
void map_channel_sums_avx512(const uint8_t *src, int64_t stride, int64_t pixels, int64_t channels,
                             const ByteValues &values, float *sums, bool vbmi = true);
// ipex::int8_map_gate's kernel: n values, dst[i] = quantize(value(src[i]) * gate) with `out`,
// the product rounded to fp32 first. gate holds one value per channel of channels-last rows
// (`channels` values each, n a multiple of it), or one value for all when channels is 0.
void map_gate_avx512(const uint8_t *src, uint8_t *dst, int64_t n, int64_t channels, const float *gate,
                     const ByteValues &values, const Params &out, bool vbmi = true);

}  // namespace ipex::quant::quantize_kernel

namespace ipex::quant {

// The op itself: input's values quantized (a 4-D NCHW input written channels-last).
at::Tensor quantize_per_tensor(const at::Tensor &input, double scale, int64_t zero_point, at::ScalarType dtype);

}  // namespace ipex::quant
