// The merged EmbeddingBag's fused backward and sparse update (merged_embedding_steps.h).
#include <torch/library.h>

#include <string>
#include <vector>

#include "ops/op_errors.h"
#include "ops/recsys/recsys_ops.h"
#include "train/merged_embedding_steps.h"
#include "train/step_args.h"
#include "train/train_ops.h"

namespace ipex::train {
namespace {

constexpr const char *kSgd = "ipex::merged_embedding_bag_sgd_step";
constexpr const char *kAdagrad = "ipex::merged_embedding_bag_adagrad_step";

// Checks each table's parameter and trail (and state) before anything is written.
void check_tables(const char *op, at::TensorList weights, const c10::List<c10::optional<at::Tensor>> &trails,
                  at::TensorList state_sums) {
    const size_t n = weights.size();
    IPEX_CHECK_INPUT(trails.size() == n, op, ": one trail per table (None for an fp32 table): ", n, " weights, ",
                     trails.size(), " trails");
    for (size_t t = 0; t < n; ++t) {
        const std::string table = std::string(op) + ": table " + std::to_string(t);
        master_of(table.c_str(), weights[t], trails.get(t));
        const std::string sum = "state_sums[" + std::to_string(t) + "]";
        if (!state_sums.empty()) state_of(table.c_str(), weights[t], state_sums[t], sum.c_str());
    }
}

std::vector<ops::recsys::GradRows> grad_rows(at::TensorList weights, at::TensorList grad_outputs,
                                             at::TensorList indices, at::TensorList offsets,
                                             const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                             at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset) {
    return ops::recsys::merged_embedding_bag_grad_rows(grad_outputs, weights, indices, offsets, per_sample_weights,
                                                        padding_idx, mode, include_last_offset);
}

}  // namespace

void merged_embedding_bag_sgd_step(at::TensorList weights, at::TensorList grad_outputs, at::TensorList indices,
                                   at::TensorList offsets,
                                   const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                   at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset,
                                   const c10::List<c10::optional<at::Tensor>> &trails, double lr, bool maximize) {
    check_tables(kSgd, weights, trails, {});
    const auto rows =
        grad_rows(weights, grad_outputs, indices, offsets, per_sample_weights, padding_idx, mode, include_last_offset);
    for (size_t t = 0; t < weights.size(); ++t) {
        if (rows[t].indices.numel() == 0) continue;
        sparse_sgd_step(weights[t], rows[t].indices, rows[t].values, trails.get(t), lr, maximize);
    }
}

void merged_embedding_bag_adagrad_step(at::TensorList weights, at::TensorList grad_outputs, at::TensorList indices,
                                       at::TensorList offsets,
                                       const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                       at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset,
                                       at::TensorList state_sums, const c10::List<c10::optional<at::Tensor>> &trails,
                                       at::IntArrayRef steps, double lr, double lr_decay, double eps, bool maximize) {
    IPEX_CHECK_INPUT(state_sums.size() == weights.size() && steps.size() == weights.size(), kAdagrad,
                     ": one state sum and one step per table: ", weights.size(), " weights, ", state_sums.size(),
                     " state_sums, ", steps.size(), " steps");
    for (size_t t = 0; t < steps.size(); ++t)
        IPEX_CHECK_INPUT(steps[t] >= 1, kAdagrad, ": steps[", t, "] counts from 1, got ", steps[t]);
    check_tables(kAdagrad, weights, trails, state_sums);
    const auto rows =
        grad_rows(weights, grad_outputs, indices, offsets, per_sample_weights, padding_idx, mode, include_last_offset);
    for (size_t t = 0; t < weights.size(); ++t) {
        if (rows[t].indices.numel() == 0) continue;
        sparse_adagrad_step(weights[t], rows[t].indices, rows[t].values, state_sums[t], trails.get(t), steps[t], lr,
                            lr_decay, eps, maximize);
    }
}

}  // namespace ipex::train

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    using namespace ipex::train;
    m.def(
        "merged_embedding_bag_sgd_step(Tensor(a!)[] weights, Tensor[] grad_outputs, Tensor[] indices, "
        "Tensor[] offsets, Tensor?[] per_sample_weights, int[] padding_idx, int mode, bool include_last_offset, "
        "Tensor(b!)?[] trails, float lr, bool maximize=False) -> ()",
        IPEX_GUARDED(merged_embedding_bag_sgd_step));
    m.def(
        "merged_embedding_bag_adagrad_step(Tensor(a!)[] weights, Tensor[] grad_outputs, Tensor[] indices, "
        "Tensor[] offsets, Tensor?[] per_sample_weights, int[] padding_idx, int mode, bool include_last_offset, "
        "Tensor(b!)[] state_sums, Tensor(c!)?[] trails, int[] steps, float lr, float lr_decay, float eps, "
        "bool maximize=False) -> ()",
        IPEX_GUARDED(merged_embedding_bag_adagrad_step));
}
