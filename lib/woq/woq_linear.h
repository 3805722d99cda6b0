// ipex::woq_linear: y = x W^T + b with W held int4/int8 per woq_layout.h. Registered as a
// TorchScript op (TORCH_LIBRARY_FRAGMENT(ipex)) so optimized models call it; callable from C++.
//   lowp_mode "fp32": fp32 activations and math.
//   lowp_mode "bf16": small batches as fp32; from kMatmulRows rows on, the weight is
//                     dequantized to bf16 and multiplied with oneDNN's bf16 matmul.
//   lowp_mode "int8": activations quantized per row to int8, VNNI dot products.
// Output has the input's dtype and shape [..., N].
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

namespace ipex::woq {

// Rows of x from which the dequantize-then-matmul path is taken.
constexpr int64_t kMatmulRows = 16;

at::Tensor woq_linear(const at::Tensor &input, const at::Tensor &qweight, const at::Tensor &scales,
                      const at::Tensor &zeros, const c10::optional<at::Tensor> &bias,
                      const c10::optional<at::Tensor> &perm, int64_t bits, int64_t group_size,
                      int64_t in_features, c10::string_view lowp_mode);

// Tests and benches: force the portable kernels even where AVX-512 is available.
void set_force_portable_kernels(bool on);

}  // namespace ipex::woq
