// The ops of recommendation models (DLRM): many EmbeddingBag tables in one call, and the dot
// interaction of the dense features with the tables' outputs. recsys_register.cpp registers
// them as ipex:: ops; the passes merge_embedding_bags and fuse_interaction put them in a graph.
//
// merged_embedding_bag: aten::embedding_bag's sum and mean pooling over each table in one call
// (one pass over each table's offsets and indices, parallel over bags of every table), fp32,
// bf16 or uint8 row-wise tables (bf16 rows widened exactly, uint8 rows dequantized as they are
// read, sums in fp32, one rounding of each output).
// interaction: T = the features stacked [B, F, D] (or concatenated and viewed), Z = T T^T, out =
// cat(features[0], Z[:, rows, cols]); only the dot products the gather reads are computed.
// Refused with an input error (exit 3), naming the op and the table: ranks and dtypes, offsets
// that do not start at 0, decrease or run past the indices, indices outside the table, pair
// indices outside the features.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <vector>

namespace ipex::ops::recsys {

// aten::embedding_bag's pooling modes the merged op has (max is not merged).
enum class PoolingMode : int64_t { kSum = 0, kMean = 1 };

// Per table t: weights[t] [rows, D] fp32 or bf16, or [rows, D + 8] uint8 row-wise (a row's D
// values q, then its fp32 scale and fp32 bias: value = q * scale + bias; aten's byte row-wise
// layout, quantized::embedding_bag_byte_prepack's output); indices[t] 1-D int32/int64; offsets[t] 1-D
// int32/int64, bag b = [offsets[b], offsets[b + 1]) with the last bag ending at the indices'
// end unless include_last_offset (then offsets has one entry more than there are bags);
// per_sample_weights[t] (sum only) one weight per index; padding_idx[t] a row skipped (neither
// summed nor counted by mean), -1 for none. -> [bags, D] per table, of `dtype` (default: the
// table's dtype, fp32 for uint8). An empty bag gives zeros.
std::vector<at::Tensor> merged_embedding_bag(at::TensorList weights, at::TensorList indices, at::TensorList offsets,
                                             const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                             at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset,
                                             c10::optional<at::ScalarType> dtype);

// The op as registered (ipex::merged_embedding_bag): the forward above; `sparse` chooses the
// layout of the tables' gradients when autograd differentiates it (merged_embedding_bag_autograd.cpp),
// as aten::embedding_bag's does.
std::vector<at::Tensor> merged_embedding_bag_op(at::TensorList weights, at::TensorList indices, at::TensorList offsets,
                                                const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                                at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset,
                                                c10::optional<at::ScalarType> dtype, bool sparse);

// The gradient rows of merged_embedding_bag, as aten's sparse EmbeddingBag backward makes them
// (nn.EmbeddingBag(sparse=True)): per table, one row per index position j that lies in a bag and
// is not padding_idx, in position order (duplicates not summed): indices[k] (int64) = the table
// row, values[k] (fp32 [D]) = grad_outputs[t][the bag of j], times per_sample_weights[j] (sum), or
// times 1 / n (mean; n = the bag's rows that are not padding_idx; 1 / n rounded to fp32 first, as
// aten does). grad_outputs[t] is [bags, D], fp32 or bf16; weights[t] fp32 or bf16 (only its shape
// is read). The arguments are checked as the forward's; indices outside the table, a gradient of
// the wrong shape or dtype are input errors naming the table and the argument.
struct GradRows {
    at::Tensor indices, values;
};
std::vector<GradRows> merged_embedding_bag_grad_rows(at::TensorList grad_outputs, at::TensorList weights,
                                                     at::TensorList indices, at::TensorList offsets,
                                                     const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                                     at::IntArrayRef padding_idx, int64_t mode,
                                                     bool include_last_offset);

// merged_embedding_bag's backward. weight_grads: per table the weight's gradient, with `sparse` a
// sparse COO tensor [rows, D] of the rows above (uncoalesced, as nn.EmbeddingBag(sparse=True)
// gives it; an empty one has indices [1, 0]), else dense [rows, D] (the rows added in position
// order); in the table's dtype. per_sample_weights_grads: per index position dot(grad_output of
// its bag, its table row), summed in double and rounded once, 0 at padding_idx, in the weights'
// dtype. A list is empty when not asked for; a table without per_sample_weights has an undefined
// entry.
std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>> merged_embedding_bag_backward(
    at::TensorList grad_outputs, at::TensorList weights, at::TensorList indices, at::TensorList offsets,
    const c10::List<c10::optional<at::Tensor>> &per_sample_weights, at::IntArrayRef padding_idx, int64_t mode,
    bool include_last_offset, bool sparse, bool weight_grads, bool per_sample_weights_grads);

// An fp32 or bf16 table [rows, D] as uint8 rows [rows, D + 8] (layout above): per row, bias =
// the row's min, scale = (max - min) / 255, q = round((x - bias) / scale), so each value is within
// scale / 2 of its dequantized one (plus fp32 rounding). A NaN or infinity is an input error.
at::Tensor quantize_rows_uint8(const at::Tensor &table);
// uint8 rows back to fp32 [rows, D] (q * scale + bias, each rounded as the merged op does).
at::Tensor dequantize_rows_uint8(const at::Tensor &packed);

// features: F tensors; view_size: when given, T = cat(features, 1).view(view_size), else T =
// stack(features, 1); dtype: when given, T is cast to it before the products (a bf16 model's
// bmm); rows/cols: the pairs gathered, else tril_indices(F, F, tril_offset).
// -> cat([features[0], Z[:, rows, cols]], 1). F features [B, D] of one dtype (fp32 or bf16, and
// dtype's if given) take the own kernel; anything else is computed with aten's ops as written.
at::Tensor interaction(at::TensorList features, c10::optional<at::IntArrayRef> view_size,
                       const c10::optional<at::Tensor> &rows, const c10::optional<at::Tensor> &cols,
                       int64_t tril_offset, c10::optional<at::ScalarType> dtype);

}  // namespace ipex::ops::recsys
