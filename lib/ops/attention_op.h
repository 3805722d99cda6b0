// ipex::attention: softmax(scale * q·kᵀ, masked, + bias, causal) · v in one op, computed in
// blocks with an online softmax (attention_kernel.h), in the inputs' dtype (fp32, or bf16
// with fp32 sums and softmax). fuse_attention puts it where a model spells attention out.
//
//   query [..., Lq, D], key [..., Lk, D], value [..., Lk, Dv]; batch dims broadcast as matmul's.
//   Scores s = scale * query·keyᵀ, then in this order:
//     mask (bool, broadcast to [..., Lq, Lk]): mask_keeps ? where(mask, s, fill)
//                                                       : masked_fill(s, mask, fill)
//     bias (floating, broadcast to [..., Lq, Lk]): s + bias
//     causal: s[i, j] = -inf for j > i + Lk - Lq
//   out = softmax(s, -1) · value: [..., Lq, Dv] in the query's dtype. A row whose every
//   score is -inf gives NaN, as softmax does. Rank-4 outputs are laid out [B, Lq, H, Dv] in
//   memory (the permute and reshape that usually follow are then views).
// Mixed or other dtypes, and a CPU without AVX-512 (AVX512-BF16 for bf16), run the same
// computation with aten ops (attention_reference).
#pragma once

#include <ATen/ATen.h>

namespace ipex::ops {

at::Tensor attention(const at::Tensor &query, const at::Tensor &key, const at::Tensor &value,
                     const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &mask, bool mask_keeps,
                     double fill, double scale, bool causal);

// The definition above in aten ops, computed in fp32 (tests compare the op with it).
at::Tensor attention_reference(const at::Tensor &query, const at::Tensor &key, const at::Tensor &value,
                               const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &mask,
                               bool mask_keeps, double fill, double scale, bool causal);

}  // namespace ipex::ops
