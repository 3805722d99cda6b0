// The backward of merged_embedding_bag (recsys_ops.h): the gradient rows of every table as aten's
// sparse EmbeddingBag backward makes them, the dense and sparse weight gradients built from them,
// and the per_sample_weights' gradient.
#include <ATen/Parallel.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "ops/op_errors.h"
#include "ops/recsys/bag_args.h"
#include "ops/recsys/recsys_ops.h"

namespace ipex::ops::recsys {
namespace {

constexpr const char *kOp = "merged_embedding_bag_backward";
constexpr int64_t kNoBag = -1;

// One table's backward arguments, checked, and where each index position goes.
struct BagGrad {
    int64_t rows = 0, dim = 0;
    at::Tensor grad;    // fp32 [bags, dim], contiguous
    at::Tensor weight;  // contiguous
    at::Tensor psw;     // fp32 [positions], contiguous, or undefined
    at::ScalarType psw_dtype = at::kFloat;
    int64_t padding_idx = -1;
    std::vector<int64_t> row;       // per position: the table row
    std::vector<int64_t> bag;       // per position: its bag, kNoBag past the last bag
    std::vector<float> scale;       // per bag: 1 / n for mean
    std::vector<int64_t> kept;      // the positions that take a gradient row, in order
};

BagGrad checked_grad(int64_t t, const at::Tensor &grad, const at::Tensor &weight, const at::Tensor &indices,
                     const at::Tensor &offsets, const c10::optional<at::Tensor> &per_sample_weights,
                     int64_t padding_idx, PoolingMode mode, bool include_last_offset) {
    IPEX_CHECK_INPUT(weight.defined() && weight.dim() == 2 &&
                         (weight.scalar_type() == at::kFloat || weight.scalar_type() == at::kBFloat16),
                     kOp, ": table ", t, ": weights[", t,
                     "] must be an fp32 or bf16 [rows, dim] table (uint8 row-wise tables are for inference), got ",
                     weight.defined() ? weight.scalar_type() : at::ScalarType::Undefined, " ",
                     weight.defined() ? weight.sizes() : at::IntArrayRef{});
    IPEX_CHECK_INPUT(indices.dim() == 1 && (indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt),
                     kOp, ": table ", t, ": indices[", t, "] must be a 1-D int64 or int32 tensor, got ",
                     indices.scalar_type(), " ", indices.sizes());
    IPEX_CHECK_INPUT(offsets.dim() == 1 && (offsets.scalar_type() == at::kLong || offsets.scalar_type() == at::kInt),
                     kOp, ": table ", t, ": offsets[", t, "] must be a 1-D int64 or int32 tensor, got ",
                     offsets.scalar_type(), " ", offsets.sizes());
    BagGrad g;
    g.rows = weight.size(0);
    g.dim = weight.size(1);
    IPEX_CHECK_INPUT(padding_idx >= -1 && padding_idx < g.rows, kOp, ": table ", t, ": padding_idx ", padding_idx,
                     " is not a row of the ", g.rows, "-row table (-1 for none)");
    g.padding_idx = padding_idx;
    const int64_t positions = indices.numel();
    const at::Tensor off = checked_offsets(kOp, t, offsets, positions, include_last_offset);
    const int64_t bags = include_last_offset ? off.numel() - 1 : off.numel();
    IPEX_CHECK_INPUT(grad.defined() && grad.dim() == 2 && grad.size(0) == bags && grad.size(1) == g.dim &&
                         (grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kBFloat16),
                     kOp, ": table ", t, ": grad_outputs[", t, "] must be fp32 or bf16 [", bags, ", ", g.dim,
                     "] (the table's output), got ", grad.defined() ? grad.scalar_type() : at::ScalarType::Undefined,
                     " ", grad.defined() ? grad.sizes() : at::IntArrayRef{});
    g.grad = grad.to(at::kFloat).contiguous();
    g.weight = weight.contiguous();
    if (per_sample_weights && per_sample_weights->defined()) {
        const at::Tensor &w = *per_sample_weights;
        IPEX_CHECK_INPUT(mode == PoolingMode::kSum, kOp, ": table ", t,
                         ": per_sample_weights are defined for sum pooling only");
        IPEX_CHECK_INPUT(w.is_floating_point() && w.dim() == 1 && w.numel() == positions, kOp, ": table ", t,
                         ": per_sample_weights[", t, "] must be a floating 1-D tensor of one weight per index (",
                         positions, "), got ", w.scalar_type(), " ", w.sizes());
        g.psw = w.to(at::kFloat).contiguous();
        g.psw_dtype = w.scalar_type();
    }
    const at::Tensor idx = indices.to(at::kLong).contiguous();
    const int64_t *idx_data = idx.data_ptr<int64_t>();
    g.row.assign(idx_data, idx_data + positions);
    for (int64_t j = 0; j < positions; ++j)
        IPEX_CHECK_INPUT(g.row[j] >= 0 && g.row[j] < g.rows, kOp, ": table ", t, ": indices[", t, "][", j,
                         "] = ", g.row[j], " is outside the ", g.rows, "-row table");
    const int64_t *o = off.data_ptr<int64_t>();
    g.bag.assign(static_cast<size_t>(positions), kNoBag);
    std::vector<int64_t> count(static_cast<size_t>(bags), 0);
    for (int64_t b = 0; b < bags; ++b) {
        const int64_t end = b + 1 < off.numel() ? o[b + 1] : positions;
        for (int64_t j = o[b]; j < end; ++j) {
            g.bag[j] = b;
            if (g.row[j] == padding_idx) continue;
            ++count[b];
            g.kept.push_back(j);
        }
    }
    if (mode == PoolingMode::kMean) {
        g.scale.resize(static_cast<size_t>(bags));
        // aten: 1 / bag_size as a float tensor, then the rows times it.
        for (int64_t b = 0; b < bags; ++b) g.scale[b] = 1.f / static_cast<float>(count[b]);
    }
    return g;
}

std::vector<BagGrad> checked_grads(at::TensorList grad_outputs, at::TensorList weights, at::TensorList indices,
                                   at::TensorList offsets,
                                   const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                   at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset) {
    const int64_t n = static_cast<int64_t>(weights.size());
    IPEX_CHECK_INPUT(static_cast<int64_t>(grad_outputs.size()) == n && static_cast<int64_t>(indices.size()) == n &&
                         static_cast<int64_t>(offsets.size()) == n &&
                         static_cast<int64_t>(per_sample_weights.size()) == n &&
                         static_cast<int64_t>(padding_idx.size()) == n,
                     kOp, ": one entry per table in each list: ", n, " weights, ", grad_outputs.size(),
                     " grad_outputs, ", indices.size(), " indices, ", offsets.size(), " offsets, ",
                     per_sample_weights.size(), " per_sample_weights, ", padding_idx.size(), " padding_idx");
    IPEX_CHECK_INPUT(mode == 0 || mode == 1, kOp, ": mode must be 0 (sum) or 1 (mean), got ", mode);
    std::vector<BagGrad> tables;
    tables.reserve(n);
    for (int64_t t = 0; t < n; ++t)
        tables.push_back(checked_grad(t, grad_outputs[t], weights[t], indices[t], offsets[t], per_sample_weights.get(t),
                                      padding_idx[t], static_cast<PoolingMode>(mode), include_last_offset));
    return tables;
}

// Gradient row k of a table: its bag's gradient times the index's factor (one rounding each).
void write_row(const BagGrad &g, int64_t k, float *dst) {
    const int64_t j = g.kept[k];
    const int64_t b = g.bag[j];
    const float *src = g.grad.data_ptr<float>() + b * g.dim;
    if (!g.scale.empty()) {
        const float s = g.scale[b];
        for (int64_t d = 0; d < g.dim; ++d) dst[d] = src[d] * s;
    } else if (g.psw.defined()) {
        const float w = g.psw.data_ptr<float>()[j];
        for (int64_t d = 0; d < g.dim; ++d) dst[d] = src[d] * w;
    } else {
        std::copy(src, src + g.dim, dst);
    }
}

std::vector<GradRows> rows_of(const std::vector<BagGrad> &tables) {
    std::vector<GradRows> out(tables.size());
    std::vector<int64_t> first{0};  // rows of the tables before, for the flat work index
    for (size_t t = 0; t < tables.size(); ++t) {
        const BagGrad &g = tables[t];
        const int64_t nnz = static_cast<int64_t>(g.kept.size());
        out[t].indices = at::empty({nnz}, at::kLong);
        out[t].values = at::empty({nnz, g.dim}, at::kFloat);
        int64_t *dst = out[t].indices.data_ptr<int64_t>();
        for (int64_t k = 0; k < nnz; ++k) dst[k] = g.row[g.kept[k]];
        first.push_back(first.back() + nnz);
    }
    at::parallel_for(0, first.back(), 64, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
            const size_t t = std::upper_bound(first.begin(), first.end(), item) - first.begin() - 1;
            const int64_t k = item - first[t];
            write_row(tables[t], k, out[t].values.data_ptr<float>() + k * tables[t].dim);
        }
    });
    return out;
}

// d output / d per_sample_weights[j] = dot(grad of j's bag, j's row); 0 at padding_idx.
at::Tensor psw_grad(const BagGrad &g) {
    const int64_t positions = static_cast<int64_t>(g.row.size());
    at::Tensor out = at::zeros({positions}, at::kFloat);
    float *dst = out.data_ptr<float>();
    const bool bf16 = g.weight.scalar_type() == at::kBFloat16;
    at::parallel_for(0, positions, 256, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
            if (g.bag[j] == kNoBag || g.row[j] == g.padding_idx) continue;
            const float *grad = g.grad.data_ptr<float>() + g.bag[j] * g.dim;
            double sum = 0.0;
            if (bf16) {
                const auto *w = static_cast<const uint16_t *>(g.weight.data_ptr()) + g.row[j] * g.dim;
                for (int64_t d = 0; d < g.dim; ++d)
                    sum += static_cast<double>(grad[d]) * static_cast<double>(kernels::from_bf16(w[d]));
            } else {
                const float *w = g.weight.data_ptr<float>() + g.row[j] * g.dim;
                for (int64_t d = 0; d < g.dim; ++d) sum += static_cast<double>(grad[d]) * static_cast<double>(w[d]);
            }
            dst[j] = static_cast<float>(sum);
        }
    });
    return out.to(g.psw_dtype);
}

}  // namespace

std::vector<GradRows> merged_embedding_bag_grad_rows(at::TensorList grad_outputs, at::TensorList weights,
                                                     at::TensorList indices, at::TensorList offsets,
                                                     const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                                     at::IntArrayRef padding_idx, int64_t mode,
                                                     bool include_last_offset) {
    return rows_of(checked_grads(grad_outputs, weights, indices, offsets, per_sample_weights, padding_idx, mode,
                                 include_last_offset));
}

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>> merged_embedding_bag_backward(
    at::TensorList grad_outputs, at::TensorList weights, at::TensorList indices, at::TensorList offsets,
    const c10::List<c10::optional<at::Tensor>> &per_sample_weights, at::IntArrayRef padding_idx, int64_t mode,
    bool include_last_offset, bool sparse, bool weight_grads, bool per_sample_weights_grads) {
    const std::vector<BagGrad> tables =
        checked_grads(grad_outputs, weights, indices, offsets, per_sample_weights, padding_idx, mode,
                      include_last_offset);
    std::vector<at::Tensor> weight_out, psw_out;
    if (weight_grads) {
        std::vector<GradRows> rows = rows_of(tables);
        for (size_t t = 0; t < tables.size(); ++t) {
            const at::ScalarType dtype = weights[t].scalar_type();
            const at::Tensor values = rows[t].values.to(dtype);
            if (sparse) {
                weight_out.push_back(at::_sparse_coo_tensor_unsafe(rows[t].indices.view({1, -1}), values,
                                                                   weights[t].sizes(),
                                                                   values.options().layout(at::kSparse)));
            } else {
                // index_add_ adds the rows one after the other, in position order.
                weight_out.push_back(at::zeros(weights[t].sizes(), values.options()).index_add_(0, rows[t].indices, values));
            }
        }
    }
    if (per_sample_weights_grads) {
        for (const BagGrad &g : tables) psw_out.push_back(g.psw.defined() ? psw_grad(g) : at::Tensor());
    }
    return {std::move(weight_out), std::move(psw_out)};
}

}  // namespace ipex::ops::recsys
