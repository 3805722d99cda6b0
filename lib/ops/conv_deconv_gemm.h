// A transposed convolution whose kernel equals its stride (no padding, output padding or
// dilation, one group: ConvTranspose2d(c, c', 2, stride=2) in Mask R-CNN's mask head and U-Net's
// upsampling) is a GEMM: each input position writes its own kernel-sized block of the output,
// and no two blocks overlap. For input X [n, s1..sd, ic] (channels-last) and weight W
// [ic, oc, k1..kd]:
//     Y[n, s1*k1 + i1, .., sd*kd + id, oc] = sum_ic X[n, s1..sd, ic] * W[ic, oc, i1..id] + b[oc]
// For each prefix (i1..i(d-1)) of the kernel taps this is one oneDNN matmul of X, as
// [n*s1, s2..sd, ic], by that prefix's weights [ic, kd*oc], written straight into the output
// through strides: rows kd*oc apart, the rows of one (n, s1, ..) line k1 output lines apart. The
// sums are the deconvolution's (the same products, each summed over ic once), the post-ops
// oneDNN's own. oneDNN 2.6's deconvolution kernel ran this shape at 9% of the fp32 peak on AVX2
// (it walks every output position and skips the taps the stride leaves out).
#pragma once

#include <ATen/ATen.h>

#include <dnnl.hpp>

#include <vector>

#include "ops/state_checks.h"

namespace ipex::ops {

// Whether a convolution of this geometry (`weight_sizes` in PyTorch's layout) runs as GEMMs.
bool deconv_as_gemm(const ConvParams &p, at::IntArrayRef weight_sizes);

// The weight as the GEMMs read it, in `math`: [prefixes][ic][kd * oc] (prefixes = k1 * .. * k(d-1)).
at::Tensor deconv_gemm_weight(const at::Tensor &weight, at::ScalarType math);

// The bias over a GEMM's columns (kd copies of b), in `type`.
at::Tensor deconv_gemm_bias(const at::Tensor &bias, int64_t last_kernel, at::ScalarType type);

// One input shape's GEMM: descriptors (src dense channels-last; dst strided into the output) and
// where each prefix's weights and output block start, in elements.
struct DeconvGemmShape {
    dnnl::memory::desc src, weights, bias, dst;
    std::vector<int64_t> weight_offsets, dst_offsets;
};
DeconvGemmShape deconv_gemm_shape(at::IntArrayRef src_sizes, at::IntArrayRef kernel, int64_t out_channels,
                                  at::ScalarType math, at::ScalarType dst_type, bool bias,
                                  at::ScalarType bias_type);

}  // namespace ipex::ops
