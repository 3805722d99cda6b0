#include <ATen/Parallel.h>

#include <vector>

#include "base/isa.h"
#include "ops/op_errors.h"
#include "ops/recsys/interaction_driver.h"
#include "ops/recsys/recsys_ops.h"

namespace ipex::ops::recsys {
namespace {

// Lane l += x[k] * y[k] for k = l, l + 16, ...: whole blocks of 16 first (which the compiler
// vectorizes lane for lane), then the tail; the lanes reduced in the documented order. fp32
// rows only: the driver widens a bf16 sample's rows once (a bf16 dot widening one element at
// a time does not vectorize).
float dot(const void *xv, const void *yv, bool bf16, int64_t dim) {
    TORCH_INTERNAL_ASSERT(!bf16, "the portable interaction dot takes widened rows");
    const float *x = static_cast<const float *>(xv), *y = static_cast<const float *>(yv);
    float lanes[kDotLanes] = {};
    int64_t k = 0;
    for (; k + kDotLanes <= dim; k += kDotLanes)
        for (int64_t l = 0; l < kDotLanes; ++l) lanes[l] += x[k + l] * y[k + l];
    for (int64_t l = 0; k + l < dim; ++l) lanes[l] += x[k + l] * y[k + l];
    return reduce_lanes(lanes);
}

}  // namespace

void run_interaction(const InteractionProblem &p) { drive_interaction(p, dot, /*widen_bf16=*/true); }

namespace avx512 {
bool available() { return isa::avx512(); }
}  // namespace avx512

namespace {

constexpr const char *kOp = "interaction";

using Kernel = void (*)(const InteractionProblem &);

// The kernels, fastest first, each with what it needs; the portable one last.
Kernel choose_kernel() {
    if (avx512::available()) return avx512::run_interaction;
    return run_interaction;
}

// The formula as written, on aten's ops: anything the kernel does not take.
at::Tensor stacked(at::TensorList features, c10::optional<at::IntArrayRef> view_size,
                   c10::optional<at::ScalarType> dtype) {
    const at::Tensor t = view_size ? at::cat(features, 1).view(*view_size) : at::stack(features, 1);
    return dtype ? t.to(*dtype) : t;
}

at::Tensor interaction_aten(at::TensorList features, c10::optional<at::IntArrayRef> view_size, const at::Tensor &rows,
                            const at::Tensor &cols, c10::optional<at::ScalarType> dtype) {
    const at::Tensor t = stacked(features, view_size, dtype);
    const at::Tensor z = at::bmm(t, t.transpose(1, 2));
    const at::Tensor flat = at::index(z, c10::List<c10::optional<at::Tensor>>({c10::nullopt, rows, cols}));
    return at::cat({features[0], flat}, 1);
}

// Whether the features are F [B, D] matrices of one fp32 or bf16 dtype, rows dense, and the
// view (if any) makes them [B, F, D]: the kernel's case.
bool kernel_takes(at::TensorList features, c10::optional<at::IntArrayRef> view_size) {
    const at::Tensor &first = features[0];
    if (first.dim() != 2 || (first.scalar_type() != at::kFloat && first.scalar_type() != at::kBFloat16)) return false;
    for (const at::Tensor &f : features)
        if (f.dim() != 2 || f.sizes() != first.sizes() || f.scalar_type() != first.scalar_type() ||
            (f.size(1) > 1 && f.stride(1) != 1) || f.is_conj() || f.is_neg())
            return false;
    if (!view_size) return true;
    const int64_t batch = first.size(0), dim = first.size(1), n = static_cast<int64_t>(features.size());
    std::vector<int64_t> want{batch, n, dim};
    try {
        return at::infer_size(*view_size, batch * n * dim) == want;
    } catch (const c10::Error &) {
        return false;  // aten's view raises its own error
    }
}

// Whether rows and cols are pairs of feature indices: 1-D integer tensors of one length (masks
// and broadcast index shapes are aten's indexing, left to it).
bool are_pairs(const at::Tensor &rows, const at::Tensor &cols) {
    const auto integer = [](const at::Tensor &t) {
        return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt;
    };
    return rows.dim() == 1 && cols.dim() == 1 && rows.numel() == cols.numel() && integer(rows) && integer(cols);
}

// index as int64 pairs within [0, features), negative ones counted from the end.
std::vector<int64_t> checked_pairs(const at::Tensor &index, int64_t features, const char *what) {
    const at::Tensor values = index.to(at::kLong).contiguous();
    std::vector<int64_t> out(values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel());
    for (size_t q = 0; q < out.size(); ++q) {
        IPEX_CHECK_INPUT(out[q] >= -features && out[q] < features, kOp, ": ", what, "[", q, "] = ", out[q],
                         " is not one of the ", features, " features");
        if (out[q] < 0) out[q] += features;
    }
    return out;
}

}  // namespace

at::Tensor interaction(at::TensorList features, c10::optional<at::IntArrayRef> view_size,
                       const c10::optional<at::Tensor> &rows, const c10::optional<at::Tensor> &cols,
                       int64_t tril_offset, c10::optional<at::ScalarType> dtype) {
    IPEX_CHECK_INPUT(!features.empty(), kOp, ": needs at least one feature");
    IPEX_CHECK_INPUT(rows.has_value() == cols.has_value(), kOp, ": rows and cols are given together or not at all");
    // The kernel's case: the features of one dtype, the cast (if any) to the first one's dtype
    // (otherwise they are cast one by one: rounding commutes with stacking).
    std::vector<at::Tensor> cast;
    at::TensorList inputs = features;
    const bool first_in_dtype = !dtype || features[0].scalar_type() == *dtype;
    if (dtype && first_in_dtype) {
        for (const at::Tensor &f : features) cast.push_back(f.to(*dtype));
        inputs = cast;
    }
    const bool kernel = first_in_dtype && kernel_takes(inputs, view_size);
    // The feature count as the gather sees it (Z is [B, F, F]).
    const int64_t n = kernel ? static_cast<int64_t>(features.size()) : stacked(features, view_size, dtype).size(1);
    at::Tensor r, c;
    if (rows) {
        r = *rows;
        c = *cols;
    } else {
        const at::Tensor tril = at::tril_indices(n, n, tril_offset);
        r = tril[0];
        c = tril[1];
    }
    if (!are_pairs(r, c)) return interaction_aten(features, view_size, r, c, dtype);
    const std::vector<int64_t> row_index = checked_pairs(r, n, "rows"), col_index = checked_pairs(c, n, "cols");
    if (!kernel) return interaction_aten(features, view_size, r, c, dtype);

    const at::Tensor &first = inputs[0];
    const int64_t batch = first.size(0), dim = first.size(1);
    InteractionProblem p;
    std::vector<const void *> data;
    std::vector<int64_t> stride;
    for (const at::Tensor &f : inputs) {
        data.push_back(f.data_ptr());
        stride.push_back(f.stride(0));
    }
    at::Tensor out = at::empty({batch, dim + static_cast<int64_t>(row_index.size())}, first.options());
    p.bf16 = first.scalar_type() == at::kBFloat16;
    p.features = data.data();
    p.feature_stride = stride.data();
    p.features_n = n;
    p.dim = dim;
    p.rows = row_index.data();
    p.cols = col_index.data();
    p.pairs = static_cast<int64_t>(row_index.size());
    p.dst = out.data_ptr();
    const Kernel run = choose_kernel();
    at::parallel_for(0, batch, 8, [&](int64_t begin, int64_t end) {
        InteractionProblem part = p;
        part.b_begin = begin;
        part.b_end = end;
        run(part);
    });
    return out;
}

}  // namespace ipex::ops::recsys
