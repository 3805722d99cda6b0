#include "ops/conv_deconv_gemm.h"

#include <c10/util/accumulate.h>

#include "ops/onednn_utils.h"

namespace ipex::ops {

using dnnl::memory;

bool deconv_as_gemm(const ConvParams &p, at::IntArrayRef weight_sizes) {
    if (!p.transposed || p.groups != 1) return false;
    for (size_t d = 0; d + 2 < weight_sizes.size(); ++d) {
        if (p.stride[d] != weight_sizes[d + 2] || p.padding[d] != 0 || p.dilation[d] != 1) return false;
        if (!p.output_padding.empty() && p.output_padding[d] != 0) return false;
    }
    return weight_sizes.size() >= 3;
}

at::Tensor deconv_gemm_weight(const at::Tensor &weight, at::ScalarType math) {
    const int64_t d = weight.dim() - 2;
    // [ic, oc, k1..kd] -> [k1..k(d-1), ic, kd, oc]
    std::vector<int64_t> order;
    for (int64_t i = 0; i + 1 < d; ++i) order.push_back(i + 2);
    order.insert(order.end(), {0, d + 1, 1});
    const int64_t prefixes = c10::multiply_integers(weight.sizes().slice(2, d - 1));
    return weight.to(math).permute(order).contiguous().view(
        {prefixes, weight.size(0), weight.size(d + 1) * weight.size(1)});
}

at::Tensor deconv_gemm_bias(const at::Tensor &bias, int64_t last_kernel, at::ScalarType type) {
    return bias.to(type).repeat({last_kernel}).contiguous();
}

DeconvGemmShape deconv_gemm_shape(at::IntArrayRef src_sizes, at::IntArrayRef kernel, int64_t out_channels,
                                  at::ScalarType math, at::ScalarType dst_type, bool bias, at::ScalarType bias_type) {
    const int64_t d = static_cast<int64_t>(kernel.size());
    const int64_t n = src_sizes[0], ic = src_sizes[1];
    const int64_t cols = kernel[d - 1] * out_channels;
    // The output's element strides per spatial dim (channels-last, dense).
    std::vector<int64_t> out_stride(d);
    int64_t stride = out_channels;
    for (int64_t i = d - 1; i >= 0; --i) {
        out_stride[i] = stride;
        stride *= src_sizes[2 + i] * kernel[i];
    }
    // Matmul batch dims: (n, s1) merged, then s2..s(d-1); rows: sd (d = 1: the merged (n, s1)).
    // Each steps k_i output positions of its spatial dim; out_stride[d - 1] is out_channels.
    memory::dims dims{n * src_sizes[2]}, dst_strides{kernel[0] * out_stride[0]};
    for (int64_t i = 1; i < d; ++i) {
        dims.push_back(src_sizes[2 + i]);
        dst_strides.push_back(kernel[i] * out_stride[i]);
    }
    memory::dims src_dims = dims, dst_dims = dims, weight_dims(dims.size() - 1, 1), bias_dims(dims.size() + 1, 1);
    src_dims.push_back(ic);
    dst_dims.push_back(cols);
    dst_strides.push_back(1);
    weight_dims.insert(weight_dims.end(), {ic, cols});
    bias_dims.back() = cols;
    // Source, weights and bias: dense row-major over their (broadcast) dims.
    const auto dense_strides = [](const memory::dims &sizes) {
        memory::dims s(sizes.size());
        int64_t step = 1;
        for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
            s[i] = step;
            step *= sizes[i];
        }
        return s;
    };
    DeconvGemmShape shape;
    shape.src = memory::desc(src_dims, to_dnnl(math), dense_strides(src_dims));
    shape.weights = memory::desc(weight_dims, to_dnnl(math), dense_strides(weight_dims));
    shape.dst = memory::desc(dst_dims, to_dnnl(dst_type), dst_strides);
    if (bias) shape.bias = memory::desc(bias_dims, to_dnnl(bias_type), dense_strides(bias_dims));
    // Prefix (i1..i(d-1)) in row-major order: weights [prefix][ic][cols]; output block at
    // sum of i * out_stride.
    const int64_t prefixes = c10::multiply_integers(kernel.slice(0, d - 1));
    for (int64_t t = 0; t < prefixes; ++t) {
        int64_t rest = t, offset = 0;
        for (int64_t i = d - 2; i >= 0; --i) {
            offset += rest % kernel[i] * out_stride[i];
            rest /= kernel[i];
        }
        shape.weight_offsets.push_back(t * ic * cols);
        shape.dst_offsets.push_back(offset);
    }
    return shape;
}

}  // namespace ipex::ops
