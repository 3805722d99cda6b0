// SGD and Adagrad on sparse row gradients (train_ops.h): the rows `indices` of the parameter
// take the gradient rows `values`, as torch.optim applies an Embedding's sparse COO gradient.
#include <ATen/Parallel.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/op_errors.h"
#include "train/step_args.h"
#include "train/step_kernels.h"
#include "train/train_ops.h"

namespace ipex::train {
namespace {

// The master, the row indices and the gradient rows, checked.
SparseRows rows_of(const char *op, const at::Tensor &param, const at::Tensor &indices, const at::Tensor &values,
                   const c10::optional<at::Tensor> &trail) {
    SparseRows r;
    r.io = master_of(op, param, trail);
    IPEX_CHECK_INPUT(param.dim() >= 1, op, ": the parameter must have rows (at least one dimension)");
    IPEX_CHECK_INPUT(indices.defined() && indices.scalar_type() == at::kLong, op,
                     ": indices must be int64 (the gradient's row indices)");
    IPEX_CHECK_INPUT(indices.dim() == 1, op, ": indices must be one-dimensional (nnz), not of shape ",
                     indices.sizes());
    IPEX_CHECK_INPUT(indices.is_contiguous() && indices.device().is_cpu(), op,
                     ": indices must be a contiguous CPU tensor");
    IPEX_CHECK_INPUT(values.defined(), op, ": values is undefined");
    std::vector<int64_t> row_shape{indices.size(0)};
    row_shape.insert(row_shape.end(), param.sizes().begin() + 1, param.sizes().end());
    IPEX_CHECK_INPUT(values.sizes() == at::IntArrayRef(row_shape), op, ": values has shape ", values.sizes(),
                     " but ", indices.size(0), " rows of the parameter (shape ", param.sizes(), ") are ",
                     at::IntArrayRef(row_shape));
    IPEX_CHECK_INPUT(values.is_contiguous() && values.device().is_cpu(), op,
                     ": values must be a contiguous CPU tensor (call .contiguous() on it)");
    if (values.scalar_type() == at::kFloat) {
        r.io.grad = values.data_ptr<float>();
    } else {
        IPEX_CHECK_INPUT(values.scalar_type() == at::kBFloat16, op, ": values must be float32 or bfloat16, not ",
                         values.scalar_type());
        r.io.grad_bf16 = values.data_ptr<at::BFloat16>();
    }
    r.indices = indices.data_ptr<int64_t>();
    r.nnz = indices.size(0);
    r.row = param.size(0) == 0 ? 0 : param.numel() / param.size(0);
    const int64_t rows = param.size(0);
    for (int64_t k = 0; k < r.nnz; ++k) {
        IPEX_CHECK_INPUT(r.indices[k] >= 0 && r.indices[k] < rows, op, ": indices[", k, "] = ", r.indices[k],
                         " is out of range for a parameter of ", rows, " rows");
    }
    return r;
}

}  // namespace

void sparse_sgd_step(at::Tensor param, const at::Tensor &indices, const at::Tensor &values,
                     const c10::optional<at::Tensor> &trail, double lr, bool maximize) {
    const char *op = "ipex::sparse_sgd_step";
    SparseSgdArgs a;
    a.rows = rows_of(op, param, indices, values, trail);
    a.neg_lr = static_cast<float>(maximize ? lr : -lr);
    const auto rows = isa::avx2_fma() ? &avx2::sparse_sgd_rows : &ref::sparse_sgd_rows;
    // Each thread owns the rows whose index falls in its lanes and applies their entries in order.
    const int64_t lanes = a.rows.nnz * a.rows.row < kGrain ? 1 : std::max(1, at::get_num_threads());
    at::parallel_for(0, lanes, 1, [&](int64_t begin, int64_t end) { rows(a, lanes, begin, end); });
    bump_versions(param, trail, {});
}

void sparse_adagrad_step(at::Tensor param, const at::Tensor &indices, const at::Tensor &values, at::Tensor state_sum,
                         const c10::optional<at::Tensor> &trail, int64_t step, double lr, double lr_decay, double eps,
                         bool maximize) {
    const char *op = "ipex::sparse_adagrad_step";
    SparseAdagradArgs a;
    a.rows = rows_of(op, param, indices, values, trail);
    a.sum = state_of(op, param, state_sum, "state_sum");
    IPEX_CHECK_INPUT(step >= 1, op, ": step counts from 1, got ", step);
    a.maximize = maximize;
    a.eps = static_cast<float>(eps);
    a.neg_clr = static_cast<float>(-(lr / (1 + static_cast<double>(step - 1) * lr_decay)));
    // torch's coalesce: the entries sorted by index with std::sort, as aten 1.13 sorts them
    // (unstable: the same comparisons give the same order of equal indices), equal indices
    // summed in that order.
    const int64_t *index = a.rows.indices;
    std::vector<std::pair<int64_t, int64_t>> sorted(static_cast<size_t>(a.rows.nnz));
    for (int64_t k = 0; k < a.rows.nnz; ++k) sorted[k] = {index[k], k};
    std::sort(sorted.begin(), sorted.end(), [](const auto &x, const auto &y) { return x.first < y.first; });
    std::vector<int64_t> order(sorted.size()), starts;
    for (size_t k = 0; k < sorted.size(); ++k) {
        order[k] = sorted[k].second;
        if (k == 0 || sorted[k].first != sorted[k - 1].first) starts.push_back(static_cast<int64_t>(k));
    }
    const int64_t distinct = static_cast<int64_t>(starts.size());
    starts.push_back(a.rows.nnz);
    a.order = order.data();
    a.starts = starts.data();
    const auto rows = isa::avx2_fma() ? &avx2::sparse_adagrad_rows : &ref::sparse_adagrad_rows;
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, a.rows.row));
    at::parallel_for(0, distinct, grain, [&](int64_t begin, int64_t end) { rows(a, begin, end); });
    bump_versions(param, trail, {&state_sum});
}

}  // namespace ipex::train
