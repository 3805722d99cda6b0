// SGD and Adagrad on the tables of ipex::merged_embedding_bag, fused with its backward: one call
// takes the outputs' gradients of every table, makes the tables' gradient rows (the rows
// nn.EmbeddingBag(sparse=True) would put in its sparse gradient: ops/recsys/recsys_ops.h,
// merged_embedding_bag_grad_rows) and applies them with sparse_sgd_step / sparse_adagrad_step
// (train_ops.h), so the tables end as torch.optim's sparse SGD / Adagrad leaves the separate
// EmbeddingBags. Tables are fp32, or bf16 with their int16 trails (split master weights); the
// Adagrad sums fp32. A table whose gradient has no rows (only empty bags or padding_idx) is
// left as it is. Arguments are checked for every table before any is written; errors name the
// table and the argument.
#pragma once

#include <ATen/ATen.h>

#include <ATen/core/List.h>
#include <c10/util/Optional.h>

namespace ipex::train {

// weights, indices, offsets, per_sample_weights, padding_idx, mode, include_last_offset: as the
// forward took them; grad_outputs: the gradient of each output [bags, D], fp32 or bf16; trails:
// per table the trail of a bf16 table, none for an fp32 one.
void merged_embedding_bag_sgd_step(at::TensorList weights, at::TensorList grad_outputs, at::TensorList indices,
                                   at::TensorList offsets,
                                   const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                   at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset,
                                   const c10::List<c10::optional<at::Tensor>> &trails, double lr, bool maximize);

// state_sums: per table Adagrad's sum (fp32, the table's shape); steps: per table torch.optim's
// step count after this step (from 1).
void merged_embedding_bag_adagrad_step(at::TensorList weights, at::TensorList grad_outputs, at::TensorList indices,
                                       at::TensorList offsets,
                                       const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                       at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset,
                                       at::TensorList state_sums, const c10::List<c10::optional<at::Tensor>> &trails,
                                       at::IntArrayRef steps, double lr, double lr_decay, double eps, bool maximize);

}  // namespace ipex::train
