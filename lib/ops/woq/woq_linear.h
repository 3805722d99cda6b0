// ipex::woq_linear: y = x W^T + b with W held int4/int8 per woq_layout.h. Registered as a
// TorchScript op (TORCH_LIBRARY_FRAGMENT(ipex)) so optimized models call it; callable from C++.
//   lowp_mode "fp32": fp32 activations and math (AVX-512 FMA; several rows share each
//                     converted weight block); from kMatmulRows rows on, weight blocks are
//                     dequantized to fp32 and multiplied with oneDNN's fp32 matmul.
//   lowp_mode "bf16": activations rounded to bf16, AVX512-BF16 dot products with fp32
//                     accumulation; from kMatmulRows rows on, a fused AVX512-BF16 kernel
//                     expands chunks of weights in cache and multiplies them with all rows
//                     (int4 in pair order exactly, with per-group scales; else as bf16 of the
//                     dequantized value); on CPUs with AMX or without AVX512-BF16, weight
//                     blocks are dequantized to bf16 and multiplied with oneDNN's matmul
//                     (without AVX-512, where oneDNN has no bf16 matmul, both in fp32).
//   lowp_mode "int8": activations quantized per row to int8, VNNI dot products; from
//                     kMatmulRows rows on as bf16.
// Output has the input's dtype and shape [..., N].
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

namespace ipex::woq {

namespace kernels {
struct TiledInt4View;
}

// Rows of x from which the dequantize-then-matmul path is taken.
constexpr int64_t kMatmulRows = 16;

at::Tensor woq_linear(const at::Tensor &input, const at::Tensor &qweight, const at::Tensor &scales,
                      const at::Tensor &zeros, const c10::optional<at::Tensor> &bias,
                      const c10::optional<at::Tensor> &perm, int64_t bits, int64_t group_size,
                      int64_t in_features, c10::string_view lowp_mode);

// out [m, n] (fp32, row stride ldo) = x W^T for int4 weights in the tiled layout
// (woq_kernels.h), x [m, k] fp32 or bf16 (rounded to bf16), by the large-batch AVX512-BF16
// kernel (exact weights for groups of 128 channels or more, else rounded to bf16:
// kernels::tiled_exact); parallel over output channels. Call only where
// isa::avx512_bf16(); every row count works, but below 16 rows a block of 16 is computed.
void tiled_int4_gemm(const kernels::TiledInt4View &w, const at::Tensor &x2d, float *out, int64_t ldo);

// The same with int8 activations (W4A8, lowp_mode "int8"): x quantized per row and
// kTiledUnit channels (kernels::QuantizeTiledS8), VNNI dot products with the weights exactly.
// Call only where isa::avx512_vnni().
void tiled_int4_gemm_s8(const kernels::TiledInt4View &w, const at::Tensor &x2d, float *out, int64_t ldo);

// Tests and benches: force the portable kernels even where AVX-512 is available.
void set_force_portable_kernels(bool on);

}  // namespace ipex::woq
