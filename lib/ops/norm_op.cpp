#include "ops/norm_op.h"

#include <torch/library.h>

#include <cstdint>
#include <vector>

#include "ops/onednn_utils.h"
#include "ops/op_errors.h"
#include "ops/own_kernels.h"

namespace ipex::ops {

bool norm_relu_uses_own_kernel(at::TensorList inputs, const at::Tensor &scale, const at::Tensor &shift) {
    if (inputs.empty()) return false;
    const at::Tensor &first = inputs[0];
    const at::ScalarType type = first.scalar_type();
    if (type != at::kFloat && type != at::kBFloat16) return false;
    int64_t channels = 0;
    for (const at::Tensor &x : inputs) {
        if (x.dim() != 4 || x.scalar_type() != type || x.size(0) != first.size(0) || x.size(2) != first.size(2) ||
            x.size(3) != first.size(3) || x.size(1) == 0 || !x.is_contiguous(at::MemoryFormat::ChannelsLast))
            return false;
        channels += x.size(1);
    }
    const auto per_channel = [&](const at::Tensor &t) {
        return t.scalar_type() == at::kFloat && t.dim() == 1 && t.numel() == channels && t.is_contiguous();
    };
    return first.numel() > 0 && per_channel(scale) && per_channel(shift);
}

at::Tensor norm_relu(at::TensorList inputs, const at::Tensor &scale, const at::Tensor &shift, bool relu) {
    if (!norm_relu_uses_own_kernel(inputs, scale, shift)) {
        const at::Tensor x = inputs.size() == 1 ? inputs[0] : at::cat(inputs, 1);
        TORCH_CHECK(x.dim() >= 2, "ipex::norm_relu: input of ", x.dim(), " dims; expected 2 or more");
        const at::ScalarType math = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
        std::vector<int64_t> shape(x.dim(), 1);
        shape[1] = -1;
        at::Tensor y = x.to(math) * scale.to(math).view(shape) + shift.to(math).view(shape);
        if (relu) y = at::relu(y);
        return y.to(x.scalar_type());
    }
    return norm_relu_own_kernel(inputs, scale, shift, relu, false);
}

at::Tensor norm_relu_own_kernel(at::TensorList inputs, const at::Tensor &scale, const at::Tensor &shift, bool relu,
                                bool portable) {
    TORCH_CHECK(norm_relu_uses_own_kernel(inputs, scale, shift), "ipex::norm_relu: inputs its kernel does not take");
    const at::Tensor &first = inputs[0];
    std::vector<const void *> src;
    std::vector<int64_t> channels;
    for (const at::Tensor &x : inputs) {
        src.push_back(x.data_ptr());
        channels.push_back(x.size(1));
    }
    at::Tensor out = empty_channels_last({first.size(0), scale.numel(), first.size(2), first.size(3)},
                                         first.scalar_type());
    own_kernels::ScaleShift p;
    p.bf16 = first.scalar_type() == at::kBFloat16;
    p.relu = relu;
    p.inputs = static_cast<int64_t>(inputs.size());
    p.src = src.data();
    p.channels = channels.data();
    p.dst = out.data_ptr();
    p.scale = scale.data_ptr<float>();
    p.shift = shift.data_ptr<float>();
    p.pixels = first.size(0) * first.size(2) * first.size(3);
    if (!portable && own_kernels::available(p.bf16)) own_kernels::run_scale_shift(p);
    else own_kernels::run_scale_shift_portable(p);
    return out;
}

namespace {

// Whether s holds one value per image and channel of x: fp32 or bf16, one dtype, x 4-D
// channels-last, s dense.
bool per_image_channel(const at::Tensor &x, const at::Tensor &s) {
    const at::ScalarType type = x.scalar_type();
    if (x.dim() != 4 || x.numel() == 0 || (type != at::kFloat && type != at::kBFloat16) ||
        s.scalar_type() != type || !x.is_contiguous(at::MemoryFormat::ChannelsLast) || !s.is_contiguous())
        return false;
    const int64_t d = s.dim();
    if (d != 3 && d != 4) return false;
    if (d == 4 && s.size(0) != 1 && s.size(0) != x.size(0)) return false;
    return s.size(d - 3) == x.size(1) && s.size(d - 2) == 1 && s.size(d - 1) == 1;
}

// bf16 products scale_mul computes: the own kernel's (fp32 ones are aten's, fast already).
bool own_dtype(const at::Tensor &x) { return x.scalar_type() == at::kBFloat16 && own_kernels::available(true); }

}  // namespace

bool scale_mul_uses_own_kernel(const at::Tensor &a, const at::Tensor &b) {
    return own_dtype(a) && (per_image_channel(a, b) || per_image_channel(b, a));
}

at::Tensor scale_mul(at::Tensor a, at::Tensor b) {
    const bool a_is_x = per_image_channel(a, b);
    if (!a_is_x && !per_image_channel(b, a)) return at::mul(a, b);
    at::Tensor &x = a_is_x ? a : b;
    const at::Tensor &s = a_is_x ? b : a;
    // x's storage may take the result when this call holds the only reference to x and to
    // its storage: then nothing else can read the values it replaces.
    const bool reuse = x.use_count() == 1 && x.storage().use_count() == 1 && !x.requires_grad();
    if (!own_dtype(x)) return reuse ? x.mul_(s) : at::mul(x, s);
    at::Tensor out = reuse ? x : empty_channels_last(x.sizes().vec(), x.scalar_type());
    own_kernels::ChannelScale p;
    p.src = reinterpret_cast<const uint16_t *>(x.data_ptr<at::BFloat16>());
    p.dst = reinterpret_cast<uint16_t *>(out.data_ptr<at::BFloat16>());
    p.scale = reinterpret_cast<const uint16_t *>(s.data_ptr<at::BFloat16>());
    p.scale_image_stride = s.dim() == 4 && s.size(0) > 1 ? x.size(1) : 0;
    p.n = x.size(0);
    p.hw = x.size(2) * x.size(3);
    p.c = x.size(1);
    own_kernels::run_channel_scale(p);
    return out;
}

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("scale_mul(Tensor self, Tensor other) -> Tensor", IPEX_GUARDED(ipex::ops::scale_mul));
    m.def("norm_relu(Tensor[] inputs, Tensor scale, Tensor shift, bool relu) -> Tensor",
          IPEX_GUARDED(ipex::ops::norm_relu));
}

}  // namespace ipex::ops
