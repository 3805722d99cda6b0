#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/isa.h"
#include "kernels/bf16.h"
#include "kernels/memory_hints.h"
#include "ops/op_errors.h"
#include "ops/recsys/bag_args.h"
#include "ops/recsys/embedding_bag_kernel.h"
#include "ops/recsys/interaction_kernel.h"
#include "ops/recsys/recsys_ops.h"

namespace ipex::ops::recsys {

void read_row_tail(const void *row, int64_t dim, float *scale, float *bias) {
    const auto *tail = static_cast<const char *>(row) + dim;
    std::memcpy(scale, tail, sizeof(float));
    std::memcpy(bias, tail + sizeof(float), sizeof(float));
}

void add_row_range(const void *row, RowType type, const float *weight, float scale, float bias, int64_t begin,
                   int64_t end, float *acc) {
    if (type == RowType::bf16) {
        const auto *src = static_cast<const uint16_t *>(row);
        if (weight) {
            for (int64_t k = begin; k < end; ++k) acc[k] += kernels::from_bf16(src[k]) * *weight;
        } else {
            for (int64_t k = begin; k < end; ++k) acc[k] += kernels::from_bf16(src[k]);
        }
        return;
    }
    if (type == RowType::uint8_rowwise) {
        const auto *src = static_cast<const uint8_t *>(row);
        if (weight) {
            for (int64_t k = begin; k < end; ++k) acc[k] += (static_cast<float>(src[k]) * scale + bias) * *weight;
        } else {
            for (int64_t k = begin; k < end; ++k) acc[k] += static_cast<float>(src[k]) * scale + bias;
        }
        return;
    }
    const auto *src = static_cast<const float *>(row);
    if (weight) {
        for (int64_t k = begin; k < end; ++k) acc[k] += src[k] * *weight;
    } else {
        for (int64_t k = begin; k < end; ++k) acc[k] += src[k];
    }
}

void add_row(const void *row, RowType type, const float *weight, int64_t dim, float *acc) {
    float scale = 0.f, bias = 0.f;
    if (type == RowType::uint8_rowwise) read_row_tail(row, dim, &scale, &bias);
    add_row_range(row, type, weight, scale, bias, 0, dim, acc);
}

// The table's offsets as int64, checked: starting at 0, non-decreasing, within the indices.
at::Tensor checked_offsets(const char *op, int64_t t, const at::Tensor &offsets, int64_t numel, bool include_last_offset) {
    const at::Tensor o = offsets.to(at::kLong).contiguous();
    const int64_t n = o.numel();
    IPEX_CHECK_INPUT(!include_last_offset || n >= 1, op, ": table ", t,
                     ": include_last_offset needs at least one offset (the end of the last bag)");
    const int64_t *p = o.data_ptr<int64_t>();
    if (n > 0)
        IPEX_CHECK_INPUT(p[0] == 0, op, ": table ", t,
                         ": offsets[0] must be 0 (the first bag starts the indices), got ", p[0]);
    for (int64_t b = 1; b < n; ++b)
        IPEX_CHECK_INPUT(p[b] >= p[b - 1], op, ": table ", t, ": offsets must not decrease, but offsets[", b,
                         "] = ", p[b], " < offsets[", b - 1, "] = ", p[b - 1]);
    if (n > 0)
        IPEX_CHECK_INPUT(p[n - 1] <= numel, op, ": table ", t, ": offsets[", n - 1, "] = ", p[n - 1], " is past the ",
                         numel, " indices");
    return o;
}

namespace {

constexpr const char *kOp = "merged_embedding_bag";

// One table's arguments, checked, with the values read at run time.
struct Table {
    at::Tensor weight_data;  // contiguous
    const void *weight = nullptr;
    RowType type = RowType::fp32;
    int64_t row_bytes = 0;  // from one row to the next
    int64_t rows = 0, dim = 0;
    at::Tensor indices, offsets, per_sample_weights;  // contiguous; int64 offsets, fp32 weights
    int64_t bags = 0;
    int64_t padding_idx = -1;
    at::Tensor out;
};

Table checked_table(int64_t t, const at::Tensor &weight, const at::Tensor &indices, const at::Tensor &offsets,
                    const c10::optional<at::Tensor> &per_sample_weights, int64_t padding_idx, bool include_last_offset,
                    PoolingMode mode, c10::optional<at::ScalarType> dtype) {
    IPEX_CHECK_INPUT(weight.dim() == 2, kOp, ": table ", t, ": weight must be [rows, dim], got ", weight.sizes());
    const at::ScalarType stored = weight.scalar_type();
    IPEX_CHECK_INPUT(stored == at::kFloat || stored == at::kBFloat16 || stored == at::kByte, kOp, ": table ", t,
                     ": weight must be fp32, bf16 or uint8 row-wise, got ", stored);
    IPEX_CHECK_INPUT(stored != at::kByte || weight.size(1) >= kRowwiseTailBytes, kOp, ": table ", t,
                     ": a uint8 weight must be [rows, dim + 8] (each row's values, then its fp32 scale and bias), got ",
                     weight.sizes());
    IPEX_CHECK_INPUT(indices.dim() == 1 && (indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt),
                     kOp, ": table ", t, ": indices must be a 1-D int64 or int32 tensor, got ", indices.scalar_type(),
                     " ", indices.sizes());
    IPEX_CHECK_INPUT(offsets.dim() == 1 && (offsets.scalar_type() == at::kLong || offsets.scalar_type() == at::kInt),
                     kOp, ": table ", t, ": offsets must be a 1-D int64 or int32 tensor, got ", offsets.scalar_type(),
                     " ", offsets.sizes());
    Table table;
    table.rows = weight.size(0);
    table.type = stored == at::kByte ? RowType::uint8_rowwise
                 : stored == at::kBFloat16 ? RowType::bf16
                                           : RowType::fp32;
    table.dim = stored == at::kByte ? weight.size(1) - kRowwiseTailBytes : weight.size(1);
    table.row_bytes = weight.size(1) * weight.element_size();
    IPEX_CHECK_INPUT(padding_idx >= -1 && padding_idx < table.rows, kOp, ": table ", t, ": padding_idx ", padding_idx,
                     " is not a row of the ", table.rows, "-row table (-1 for none)");
    table.padding_idx = padding_idx;
    table.indices = indices.contiguous();
    table.offsets = checked_offsets(kOp, t, offsets, indices.numel(), include_last_offset);
    table.bags = include_last_offset ? table.offsets.numel() - 1 : table.offsets.numel();
    if (per_sample_weights && per_sample_weights->defined()) {
        const at::Tensor &w = *per_sample_weights;
        IPEX_CHECK_INPUT(mode == PoolingMode::kSum, kOp, ": table ", t,
                         ": per_sample_weights are defined for sum pooling only");
        IPEX_CHECK_INPUT(w.is_floating_point() && w.dim() == 1 && w.numel() == indices.numel(), kOp, ": table ", t,
                         ": per_sample_weights must be a floating 1-D tensor of one weight per index (",
                         indices.numel(), "), got ", w.scalar_type(), " ", w.sizes());
        table.per_sample_weights = w.to(at::kFloat).contiguous();
    }
    table.weight_data = weight.contiguous();
    table.weight = table.weight_data.data_ptr();
    // A uint8 table pools to fp32 unless told otherwise.
    const at::ScalarType out_dtype = dtype.value_or(stored == at::kByte ? at::kFloat : stored);
    table.out = at::empty({table.bags, table.dim}, weight.options().dtype(out_dtype));
    IPEX_CHECK_INPUT(table.out.scalar_type() == at::kFloat || table.out.scalar_type() == at::kBFloat16, kOp, ": table ",
                     t, ": the output dtype must be fp32 or bf16, got ", table.out.scalar_type());
    return table;
}

using AddRow = void (*)(const void *, RowType, const float *, int64_t, float *);

// The row steps, fastest first, each with what it needs; the portable one last.
AddRow choose_add_row() {
    if (avx512::available()) return avx512::add_row;
    if (isa::avx2()) return avx2::add_row;
    return add_row;
}

// Asks for the cache lines of a bag's rows (the first kPrefetchRows of them) kPrefetchBags bags
// ahead of use: a bag's rows sit at random places in tables of GBs, and one row's lines at a time
// left each core waiting on DRAM (10% of the read bandwidth at Criteo's shapes).
constexpr int64_t kPrefetchRows = 8;
constexpr int64_t kPrefetchBags = 8;

// Pools bags [b0, b1) of table t: sums in `acc` from +0 as aten's do, row by row in index order,
// then one write of each output row (bf16: rounded once). `stream`: fp32 rows are written around
// the caches (kStreamOutputBytes).
template <typename Index>
void pool_bags(const Table &table, int64_t t, int64_t b0, int64_t b1, PoolingMode mode, AddRow add, bool stream,
               float *acc) {
    const Index *idx = table.indices.data_ptr<Index>();
    const int64_t *off = table.offsets.data_ptr<int64_t>();
    const int64_t offsets = table.offsets.numel(), indices = table.indices.numel();
    const float *psw = table.per_sample_weights.defined() ? table.per_sample_weights.data_ptr<float>() : nullptr;
    const char *weight = static_cast<const char *>(table.weight);
    const int64_t dim = table.dim, row_bytes = table.row_bytes;
    const bool bf16_out = table.out.scalar_type() == at::kBFloat16;
    float *out = bf16_out ? nullptr : table.out.data_ptr<float>();
    uint16_t *out_bf16 = bf16_out ? static_cast<uint16_t *>(table.out.data_ptr()) : nullptr;
    const auto bag_end = [&](int64_t b) { return b + 1 < offsets ? off[b + 1] : indices; };
    const auto prefetch = [&](int64_t b) {
        const int64_t end = std::min(bag_end(b), off[b] + kPrefetchRows);
        for (int64_t j = off[b]; j < end; ++j) {
            const int64_t row = static_cast<int64_t>(idx[j]);
            if (row < 0 || row >= table.rows) continue;  // reported below
            const char *p = weight + row * row_bytes;
            for (int64_t line = 0; line < row_bytes; line += 64) kernels::prefetch_once(p + line);
        }
    };
    for (int64_t b = b0; b < std::min(b1, b0 + kPrefetchBags); ++b) prefetch(b);
    for (int64_t b = b0; b < b1; ++b) {
        if (b + kPrefetchBags < b1) prefetch(b + kPrefetchBags);
        std::fill(acc, acc + dim, 0.f);
        int64_t count = 0;
        for (int64_t j = off[b], end = bag_end(b); j < end; ++j) {
            const int64_t row = static_cast<int64_t>(idx[j]);
            IPEX_CHECK_INPUT(row >= 0 && row < table.rows, kOp, ": table ", t, ": index ", row, " at position ", j,
                             " is outside the ", table.rows, "-row table");
            if (row == table.padding_idx) continue;
            ++count;
            add(weight + row * row_bytes, table.type, psw ? psw + j : nullptr, dim, acc);
        }
        if (mode == PoolingMode::kMean && count > 0) {
            const float n = static_cast<float>(count);
            for (int64_t k = 0; k < dim; ++k) acc[k] /= n;
        }
        if (bf16_out) {
            uint16_t *dst = out_bf16 + b * dim;
            for (int64_t k = 0; k < dim; ++k) dst[k] = kernels::to_bf16(acc[k]);
        } else if (stream) {
            kernels::copy_streaming(out + b * dim, acc, dim);
        } else {
            std::copy(acc, acc + dim, out + b * dim);
        }
    }
}

// f(Index{}) with the table's index type.
template <typename F>
void with_index_type(const Table &table, F &&f) {
    if (table.indices.scalar_type() == at::kLong) {
        f(int64_t{});
    } else {
        f(int32_t{});
    }
}

}  // namespace

std::vector<at::Tensor> merged_embedding_bag(at::TensorList weights, at::TensorList indices, at::TensorList offsets,
                                             const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                             at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset,
                                             c10::optional<at::ScalarType> dtype) {
    const int64_t n = static_cast<int64_t>(weights.size());
    IPEX_CHECK_INPUT(
        static_cast<int64_t>(indices.size()) == n && static_cast<int64_t>(offsets.size()) == n &&
            static_cast<int64_t>(per_sample_weights.size()) == n && static_cast<int64_t>(padding_idx.size()) == n,
        kOp, ": one entry per table in each list: ", n, " weights, ", indices.size(), " indices, ", offsets.size(),
        " offsets, ", per_sample_weights.size(), " per_sample_weights, ", padding_idx.size(), " padding_idx");
    IPEX_CHECK_INPUT(mode == 0 || mode == 1, kOp, ": mode must be 0 (sum) or 1 (mean), got ", mode);
    const auto pooling = static_cast<PoolingMode>(mode);
    std::vector<Table> tables;
    tables.reserve(n);
    std::vector<int64_t> first_bag{0};  // bags of the tables before, for the flat work index
    for (int64_t t = 0; t < n; ++t) {
        tables.push_back(checked_table(t, weights[t], indices[t], offsets[t], per_sample_weights.get(t), padding_idx[t],
                                       include_last_offset, pooling, dtype));
        first_bag.push_back(first_bag.back() + tables.back().bags);
    }
    int64_t widest = 0;
    for (const Table &table : tables) widest = std::max(widest, table.dim);
    const AddRow add = choose_add_row();
    int64_t out_bytes = 0;
    for (const Table &table : tables) out_bytes += table.out.nbytes();
    const bool stream = out_bytes > kStreamOutputBytes;
    // Work items: (table, bag) over every table, so small batches still spread over threads; each
    // thread's range is walked table by table.
    at::parallel_for(0, first_bag.back(), 16, [&](int64_t begin, int64_t end) {
        std::vector<float> acc(static_cast<size_t>(widest));
        int64_t t = std::upper_bound(first_bag.begin(), first_bag.end(), begin) - first_bag.begin() - 1;
        for (int64_t item = begin; item < end; ++t) {
            const int64_t b0 = item - first_bag[t], b1 = std::min(end, first_bag[t + 1]) - first_bag[t];
            with_index_type(tables[t], [&](auto index) {
                pool_bags<decltype(index)>(tables[t], t, b0, b1, pooling, add, stream, acc.data());
            });
            item = first_bag[t] + b1;
        }
        kernels::store_fence();
    });
    std::vector<at::Tensor> out;
    out.reserve(n);
    for (Table &table : tables) out.push_back(std::move(table.out));
    return out;
}

}  // namespace ipex::ops::recsys
