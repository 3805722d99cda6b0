// ipex::int8_cat_scale_shift(inputs, scale, shift, relu, out_scale, out_zero_point, dtype):
// per-tensor quint8/qint8 4-D inputs (one or more, same N, H, W) concatenated along the
// channels, each channel c dequantized (float(q - zero_point) * its input's scale), then
// x * scale[c] + shift[c] (an eval batch norm), an optional relu, and quantized as
// ipex::quantize_per_tensor does (x * (1 / out_scale) rounded half to even, clamped), written
// channels-last: DenseNet's cat -> batch_norm -> relu -> quantize between its int8
// convolutions, one byte read and one written per value instead of fp32 tensors in between.
// elementwise_maps.h makes it.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/op_errors.h"
#include "ops/own_kernels.h"

namespace {

constexpr const char *kOp = "ipex::int8_cat_scale_shift";

struct Part {
    const uint8_t *data;
    int64_t channels, offset;  // in the output's channels
    float scale;
    int32_t zero_point;
    bool is_signed;
};

struct Out {
    uint8_t *data;
    int64_t channels;
    const float *scale, *shift;
    float inv_scale, lo, hi;  // clamp bounds before the zero point is added
    int32_t zero_point;
    bool relu;
};

inline uint8_t one_value(const Part &part, const Out &o, int64_t c, uint8_t byte) {
    const int32_t q = part.is_signed ? static_cast<int8_t>(byte) : byte;
    float y = static_cast<float>(q - part.zero_point) * part.scale * o.scale[c] + o.shift[c];
    if (o.relu) y = std::max(y, 0.f);
    float r = std::nearbyint(y * o.inv_scale);
    r = std::min(std::max(r, o.lo), o.hi);
    return static_cast<uint8_t>(static_cast<int32_t>(r) + o.zero_point);
}

[[gnu::target("avx512f,avx512bw,avx512vl")]] void pixels_avx512(const std::vector<Part> &parts, const Out &o,
                                                                int64_t p0, int64_t p1) {
    const __m512 inv = _mm512_set1_ps(o.inv_scale), lo = _mm512_set1_ps(o.lo), hi = _mm512_set1_ps(o.hi);
    const __m512i out_zp = _mm512_set1_epi32(o.zero_point);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t p = p0; p < p1; ++p) {
        for (const Part &part : parts) {
            const uint8_t *src = part.data + p * part.channels;
            uint8_t *dst = o.data + p * o.channels + part.offset;
            const __m512i zp = _mm512_set1_epi32(part.zero_point);
            const __m512 s = _mm512_set1_ps(part.scale);
            for (int64_t c = 0; c < part.channels; c += 16) {
                const __mmask16 m = part.channels - c >= 16 ? __mmask16(0xffff)
                                                            : static_cast<__mmask16>((1u << (part.channels - c)) - 1u);
                const __m128i bytes = _mm_maskz_loadu_epi8(m, src + c);
                const __m512i q = part.is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
                const __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, zp)), s);
                const int64_t oc = part.offset + c;
                __m512 y = _mm512_add_ps(_mm512_mul_ps(x, _mm512_maskz_loadu_ps(m, o.scale + oc)),
                                         _mm512_maskz_loadu_ps(m, o.shift + oc));
                if (o.relu) y = _mm512_max_ps(y, zero);
                __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(y, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
                _mm_mask_storeu_epi8(dst + c, m, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(r), out_zp)));
            }
        }
    }
}

at::Tensor int8_cat_scale_shift(const std::vector<at::Tensor> &inputs, const at::Tensor &scale, const at::Tensor &shift,
                                bool relu, double out_scale, int64_t out_zero_point, at::ScalarType dtype) {
    IPEX_CHECK_INPUT(!inputs.empty(), kOp, ": no inputs");
    IPEX_CHECK_INPUT(dtype == at::kQUInt8 || dtype == at::kQInt8, kOp, ": dtype must be quint8 or qint8 (got ", dtype,
                     ")");
    const int64_t qmin = dtype == at::kQInt8 ? -128 : 0;
    IPEX_CHECK_INPUT(std::isfinite(out_scale) && out_scale > 0 && std::isfinite(1.0f / static_cast<float>(out_scale)) &&
                         out_zero_point >= qmin && out_zero_point <= qmin + 255,
                     kOp, ": output scale ", out_scale, " / zero point ", out_zero_point, " are not valid for ", dtype);
    if (std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor &t) { return t.dim() != 4; })) {
        // Another rank: the same numbers from aten's ops, one after the other.
        std::vector<at::Tensor> values;
        for (const at::Tensor &t : inputs) values.push_back(t.dequantize());
        const at::Tensor x = at::cat(values, 1);
        IPEX_CHECK_INPUT(x.dim() >= 2 && scale.numel() == x.size(1) && shift.numel() == x.size(1), kOp,
                         ": scale and shift must hold one value per channel (", x.sizes(), ")");
        std::vector<int64_t> shape(x.dim(), 1);
        shape[1] = x.size(1);
        at::Tensor y = x * scale.view(shape) + shift.view(shape);
        if (relu) y = at::relu(y);
        return at::quantize_per_tensor(y, out_scale, out_zero_point, dtype);
    }
    std::vector<at::Tensor> held;
    std::vector<Part> parts;
    int64_t channels = 0;
    for (const at::Tensor &t : inputs) {
        IPEX_CHECK_INPUT(t.is_quantized() && t.qscheme() == at::kPerTensorAffine &&
                             (t.scalar_type() == at::kQUInt8 || t.scalar_type() == at::kQInt8) && t.dim() == 4,
                         kOp, ": every input must be a 4-D quint8 or qint8 per-tensor quantized tensor (got ",
                         t.toString(), " ", t.sizes(), ")");
        const at::Tensor &first = inputs[0];
        IPEX_CHECK_INPUT(t.size(0) == first.size(0) && t.size(2) == first.size(2) && t.size(3) == first.size(3), kOp,
                         ": inputs of sizes ", first.sizes(), " and ", t.sizes(), " do not concatenate on channels");
        held.push_back(t.contiguous(at::MemoryFormat::ChannelsLast));
        parts.push_back(Part{static_cast<const uint8_t *>(held.back().data_ptr()), t.size(1), channels,
                             static_cast<float>(t.q_scale()), static_cast<int32_t>(t.q_zero_point()),
                             t.scalar_type() == at::kQInt8});
        channels += t.size(1);
    }
    for (const at::Tensor *v : {&scale, &shift})
        IPEX_CHECK_INPUT(v->dim() == 1 && v->numel() == channels && v->scalar_type() == at::kFloat, kOp,
                         ": scale and shift must hold ", channels, " fp32 values (got ", v->sizes(), " ",
                         v->scalar_type(), ")");
    const at::Tensor sc = scale.contiguous(), sh = shift.contiguous();
    const at::Tensor &first = held[0];
    at::Tensor out = at::_empty_affine_quantized({first.size(0), channels, first.size(2), first.size(3)},
                                                 first.options().dtype(dtype), out_scale, out_zero_point,
                                                 at::MemoryFormat::ChannelsLast);
    Out o{static_cast<uint8_t *>(out.data_ptr()), channels, sc.data_ptr<float>(), sh.data_ptr<float>(),
          1.0f / static_cast<float>(out_scale), static_cast<float>(qmin - out_zero_point),
          static_cast<float>(qmin + 255 - out_zero_point), static_cast<int32_t>(out_zero_point), relu};
    const int64_t pixels = first.size(0) * first.size(2) * first.size(3);
    const bool avx512 = ipex::ops::own_kernels::available(false);
    at::parallel_for(0, pixels, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, channels)),
                     [&](int64_t begin, int64_t end) {
        if (avx512) return pixels_avx512(parts, o, begin, end);
        for (int64_t p = begin; p < end; ++p)
            for (const Part &part : parts)
                for (int64_t c = 0; c < part.channels; ++c)
                    o.data[p * channels + part.offset + c] =
                        one_value(part, o, part.offset + c, part.data[p * part.channels + c]);
    });
    return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("int8_cat_scale_shift(Tensor[] inputs, Tensor scale, Tensor shift, bool relu, float out_scale, "
          "int out_zero_point, ScalarType dtype) -> Tensor",
          IPEX_GUARDED(int8_cat_scale_shift));
}
