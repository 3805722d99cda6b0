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
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/op_errors.h"
#include "ops/own_kernels.h"
#include "ops/int8/int8_quantize.h"
#include "ops/int8/q8_tensor.h"

namespace {

namespace qk = ipex::quant::quantize_kernel;

constexpr const char *kOp = "ipex::int8_cat_scale_shift";

// One input: its channels-last values and where its channels go in the output's.
struct Part {
    at::Tensor values;
    int64_t offset;
    qk::ScaleShift p;
};

// scale_shift_avx512's portable loop.
void scale_shift(const uint8_t *src, int64_t src_stride, uint8_t *dst, int64_t dst_stride, int64_t pixels,
                 int64_t channels, const qk::ScaleShift &p) {
    for (int64_t px = 0; px < pixels; ++px)
        for (int64_t c = 0; c < channels; ++c) {
            const uint8_t byte = src[px * src_stride + c];
            const int32_t q = p.is_signed ? static_cast<int8_t>(byte) : byte;
            const float x = static_cast<float>(q - p.zero_point) * p.scale;
            float y = x * p.channel_scale[c] + p.channel_shift[c];
            if (p.relu) y = std::max(y, 0.f);  // NaN stays NaN (std::max returns its first unless a < b)
            dst[px * dst_stride + c] = qk::quantize_value(y, p.out);
        }
}

at::Tensor int8_cat_scale_shift(const std::vector<at::Tensor> &inputs, const at::Tensor &scale, const at::Tensor &shift,
                                bool relu, double out_scale, int64_t out_zero_point, at::ScalarType dtype) {
    IPEX_CHECK_INPUT(!inputs.empty(), kOp, ": no inputs");
    ipex::quant::check_q8_output(out_scale, out_zero_point, dtype, kOp);
    IPEX_CHECK_INPUT(std::isfinite(1.0f / static_cast<float>(out_scale)), kOp, ": output scale ", out_scale,
                     " has no fp32 inverse");
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
    const at::Tensor &first = inputs[0];
    int64_t channels = 0;
    for (const at::Tensor &t : inputs) {
        IPEX_CHECK_INPUT(ipex::quant::is_q8_per_tensor(t), kOp,
                         ": every input must be a 4-D quint8 or qint8 per-tensor quantized tensor (got ",
                         t.toString(), " ", t.sizes(), ")");
        IPEX_CHECK_INPUT(t.size(0) == first.size(0) && t.size(2) == first.size(2) && t.size(3) == first.size(3), kOp,
                         ": inputs of sizes ", first.sizes(), " and ", t.sizes(), " do not concatenate on channels");
        channels += t.size(1);
    }
    for (const at::Tensor *v : {&scale, &shift})
        IPEX_CHECK_INPUT(v->dim() == 1 && v->numel() == channels && v->scalar_type() == at::kFloat, kOp,
                         ": scale and shift must hold ", channels, " fp32 values (got ", v->sizes(), " ",
                         v->scalar_type(), ")");
    const at::Tensor sc = scale.contiguous(), sh = shift.contiguous();
    std::vector<Part> parts;
    int64_t offset = 0;
    for (const at::Tensor &t : inputs) {
        Part part{t.contiguous(at::MemoryFormat::ChannelsLast), offset, {}};
        part.p.is_signed = t.scalar_type() == at::kQInt8;
        part.p.zero_point = static_cast<int32_t>(t.q_zero_point());
        part.p.scale = static_cast<float>(t.q_scale());
        part.p.channel_scale = sc.data_ptr<float>() + offset;
        part.p.channel_shift = sh.data_ptr<float>() + offset;
        part.p.relu = relu;
        part.p.out = qk::params_for(out_scale, out_zero_point, dtype == at::kQInt8);
        parts.push_back(part);
        offset += t.size(1);
    }
    at::Tensor out = at::_empty_affine_quantized({first.size(0), channels, first.size(2), first.size(3)},
                                                 first.options().dtype(dtype), out_scale, out_zero_point,
                                                 at::MemoryFormat::ChannelsLast);
    auto *dst = static_cast<uint8_t *>(out.data_ptr());
    const int64_t pixels = first.size(0) * first.size(2) * first.size(3);
    const auto kernel = ipex::ops::own_kernels::available(false) ? qk::scale_shift_avx512 : scale_shift;
    at::parallel_for(0, pixels, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, channels)),
                     [&](int64_t begin, int64_t end) {
        for (const Part &part : parts) {
            const int64_t c = part.values.size(1);
            kernel(static_cast<const uint8_t *>(part.values.data_ptr()) + begin * c, c,
                   dst + begin * channels + part.offset, channels, end - begin, c, part.p);
        }
    });
    return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("int8_cat_scale_shift(Tensor[] inputs, Tensor scale, Tensor shift, bool relu, float out_scale, "
          "int out_zero_point, ScalarType dtype) -> Tensor",
          IPEX_GUARDED(int8_cat_scale_shift));
}
