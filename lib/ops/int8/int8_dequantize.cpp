// ipex::dequantize(input): a per-tensor quint8/qint8 tensor to fp32, the values of
// aten::dequantize (float(q - zero_point) * scale), vectorized and in parallel, with the
// input's strides when it is dense (channels-last stays channels-last, an NWC view stays NWC):
// Debian's libtorch dequantizes one value at a time (2.5 ns a value on 2 cores, 40 of the
// 55 ms of an int8 EfficientNet-B0 at batch 4). Any other input (per-channel, qint32, float)
// goes to aten::dequantize. quantize writes it at every edge out of int8 (dequantize_edges).
//
// ipex::dequantize_bf16(input): a per-tensor quint8/qint8 tensor dequantized straight to bf16
// ((q - zero_point) * scale computed in fp32, rounded once to bf16), in the input's memory
// format. The edge from an int8 region into ops that run in bf16 (quantize --mixed-dtype
// bf16) then needs no fp32 tensor in between.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "ops/op_errors.h"
#include "ops/own_kernels.h"
#include "ops/int8/int8_quantize.h"
#include "ops/int8/q8_tensor.h"

namespace {

at::Tensor dequantize(const at::Tensor &input) {
    if (!ipex::quant::is_q8_per_tensor(input)) return input.dequantize();
    const at::Tensor src = ipex::quant::dense(input);
    at::Tensor out = at::empty_strided(src.sizes(), src.strides(), src.options().dtype(at::kFloat));
    const bool is_signed = src.scalar_type() == at::kQInt8;
    const auto scale = static_cast<float>(src.q_scale());
    const auto zero_point = static_cast<int32_t>(src.q_zero_point());
    const auto *in = static_cast<const uint8_t *>(src.data_ptr());
    float *dst = out.data_ptr<float>();
    const bool avx512 = ipex::ops::own_kernels::available(false);
    at::parallel_for(0, src.numel(), 32768, [&](int64_t begin, int64_t end) {
        if (avx512)
            return ipex::quant::quantize_kernel::dequantize_avx512(in + begin, is_signed, dst + begin, end - begin,
                                                                   zero_point, scale);
        for (int64_t i = begin; i < end; ++i) {
            const int32_t q = is_signed ? static_cast<int8_t>(in[i]) : in[i];
            dst[i] = static_cast<float>(q - zero_point) * scale;
        }
    });
    return out;
}

template <typename Q>
void dequantize_loop(const Q *src, c10::BFloat16 *dst, int64_t n, float scale, int32_t zero_point) {
    at::parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
            dst[i] = c10::BFloat16((static_cast<float>(src[i]) - static_cast<float>(zero_point)) * scale);
    });
}

at::Tensor dequantize_bf16(const at::Tensor &input) {
    IPEX_CHECK_INPUT(ipex::quant::is_q8_per_tensor(input),
                     "ipex::dequantize_bf16: the input must be a quint8 or qint8 per-tensor quantized tensor (got ",
                     input.toString(), ")");
    const at::MemoryFormat format = input.suggest_memory_format();
    const at::Tensor src = input.contiguous(format);
    at::Tensor out = at::empty(src.sizes(), src.options().dtype(at::kBFloat16), format);
    const auto scale = static_cast<float>(src.q_scale());
    const auto zero_point = static_cast<int32_t>(src.q_zero_point());
    auto *dst = out.data_ptr<c10::BFloat16>();
    if (src.scalar_type() == at::kQUInt8)
        dequantize_loop(static_cast<const uint8_t *>(src.data_ptr()), dst, src.numel(), scale, zero_point);
    else
        dequantize_loop(static_cast<const int8_t *>(src.data_ptr()), dst, src.numel(), scale, zero_point);
    return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("dequantize(Tensor input) -> Tensor", IPEX_GUARDED(dequantize));
    m.def("dequantize_bf16(Tensor input) -> Tensor", IPEX_GUARDED(dequantize_bf16));
}
