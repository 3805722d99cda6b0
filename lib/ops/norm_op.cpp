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
    return first.numel() > 0 && per_channel(scale) && per_channel(shift) && own_kernels::available(type == at::kBFloat16);
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
    own_kernels::run_scale_shift(p);
    return out;
}

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("norm_relu(Tensor[] inputs, Tensor scale, Tensor shift, bool relu) -> Tensor",
          IPEX_GUARDED(ipex::ops::norm_relu));
}

}  // namespace ipex::ops
