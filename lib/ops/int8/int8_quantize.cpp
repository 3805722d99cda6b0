// ipex::quantize_per_tensor (int8_quantize.h): the op, its checks and the portable loops.
#include "ops/int8/int8_quantize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "ops/op_errors.h"
#include "ops/own_kernels.h"

namespace {

namespace qk = ipex::quant::quantize_kernel;

bool avx512() { return ipex::ops::own_kernels::available(false); }

void flat(const float *src, uint8_t *dst, int64_t n, const qk::Params &p) {
    if (avx512()) return qk::flat_avx512(src, dst, n, p);
    for (int64_t i = 0; i < n; ++i) dst[i] = qk::quantize_value(src[i], p);
}

void planes_to_last(const float *src, uint8_t *dst, int64_t c, int64_t plane, int64_t p0, int64_t p1,
                    const qk::Params &p) {
    if (avx512()) return qk::planes_to_last_avx512(src, dst, c, plane, p0, p1, p);
    for (int64_t q = p0; q < p1; ++q)
        for (int64_t ch = 0; ch < c; ++ch) dst[q * c + ch] = qk::quantize_value(src[ch * plane + q], p);
}

constexpr int64_t kGrain = 32768;  // values per task

}  // namespace

namespace ipex::quant {

at::Tensor quantize_per_tensor(const at::Tensor &input, double scale, int64_t zero_point, at::ScalarType dtype) {
    IPEX_CHECK_INPUT(dtype == at::kQUInt8 || dtype == at::kQInt8,
                     "ipex::quantize_per_tensor: dtype must be quint8 or qint8 (got ", dtype, ")");
    IPEX_CHECK_INPUT(input.is_floating_point() && !input.is_quantized(),
                     "ipex::quantize_per_tensor: the input must be a float tensor (got ", input.toString(), ")");
    IPEX_CHECK_INPUT(std::isfinite(scale) && scale > 0 && std::isfinite(1.0f / static_cast<float>(scale)),
                     "ipex::quantize_per_tensor: scale must be a finite number above 0 (got ", scale, ")");
    const bool is_signed = dtype == at::kQInt8;
    const int64_t qmin = is_signed ? -128 : 0, qmax = is_signed ? 127 : 255;
    IPEX_CHECK_INPUT(zero_point >= qmin && zero_point <= qmax, "ipex::quantize_per_tensor: zero point ", zero_point,
                     " is outside ", dtype, "'s range [", qmin, ", ", qmax, "]");
    const qk::Params p = qk::params_for(scale, zero_point, is_signed);

    const at::Tensor x = input.scalar_type() == at::kFloat ? input : input.to(at::kFloat);
    const auto opts = x.options().dtype(dtype);
    if (x.dim() == 4 && x.is_contiguous() && !x.is_contiguous(at::MemoryFormat::ChannelsLast)) {
        // NCHW to channels-last in the same pass: the int8 convolutions read NHWC.
        at::Tensor out = at::_empty_affine_quantized(x.sizes(), opts, scale, zero_point, at::MemoryFormat::ChannelsLast);
        const int64_t n = x.size(0), c = x.size(1), plane = x.size(2) * x.size(3);
        const float *src = x.data_ptr<float>();
        auto *dst = static_cast<uint8_t *>(out.data_ptr());
        const int64_t chunks = std::max<int64_t>(1, plane * c / kGrain);
        const int64_t per = (plane + chunks - 1) / chunks;
        at::parallel_for(0, n * chunks, 1, [&](int64_t begin, int64_t end) {
            for (int64_t t = begin; t < end; ++t) {
                const int64_t img = t / chunks, p0 = (t % chunks) * per, p1 = std::min(plane, p0 + per);
                if (p0 < p1) planes_to_last(src + img * c * plane, dst + img * c * plane, c, plane, p0, p1, p);
            }
        });
        return out;
    }
    const at::MemoryFormat format = x.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    const at::Tensor src = x.contiguous(format);
    at::Tensor out = at::_empty_affine_quantized(src.sizes(), opts, scale, zero_point, format);
    const float *s = src.data_ptr<float>();
    auto *d = static_cast<uint8_t *>(out.data_ptr());
    at::parallel_for(0, src.numel(), kGrain, [&](int64_t begin, int64_t end) { flat(s + begin, d + begin, end - begin, p); });
    return out;
}

}  // namespace ipex::quant

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("quantize_per_tensor(Tensor input, float scale, int zero_point, ScalarType dtype) -> Tensor",
          IPEX_GUARDED(ipex::quant::quantize_per_tensor));
}
