// ipex::merged_embedding_bag under autograd: the Autograd kernel wraps the forward in a
// torch::autograd::Function whose backward is merged_embedding_bag_backward (recsys_ops.h), so
// eager code and TorchScript train through the merged tables as through nn.EmbeddingBag: a sparse
// COO gradient per table with sparse=True (a dense one otherwise) and the per_sample_weights'
// gradient. Without grad mode or a tensor that requires grad, the forward runs as it is.
#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

#include "ops/op_errors.h"
#include "ops/recsys/recsys_ops.h"

namespace ipex::ops::recsys {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The arguments that take no gradient.
struct BagArgs {
    std::vector<at::Tensor> indices, offsets;
    std::vector<int64_t> padding_idx;
    int64_t mode = 0;
    bool include_last_offset = false;
    c10::optional<at::ScalarType> dtype;
    bool sparse = false;
    std::vector<int64_t> psw_table;  // the table of each per_sample_weights tensor given
};

// Per table its per_sample_weights, undefined for none, from the defined ones (the Function
// takes no undefined tensor).
std::vector<at::Tensor> per_table(at::TensorList psw, const std::vector<int64_t> &psw_table, size_t tables) {
    std::vector<at::Tensor> out(tables);
    for (size_t k = 0; k < psw.size(); ++k) out[psw_table[k]] = psw[k];
    return out;
}

c10::List<c10::optional<at::Tensor>> optional_list(at::TensorList tensors) {
    c10::List<c10::optional<at::Tensor>> list;
    for (const at::Tensor &t : tensors) list.push_back(t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt);
    return list;
}

class MergedEmbeddingBagFunction : public torch::autograd::Function<MergedEmbeddingBagFunction> {
public:
    // given_psw: the per_sample_weights tensors of the tables args.psw_table names.
    static variable_list forward(AutogradContext *ctx, at::TensorList weights, at::TensorList given_psw,
                                 const BagArgs &args) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        const std::vector<at::Tensor> psw = per_table(given_psw, args.psw_table, weights.size());
        variable_list out = merged_embedding_bag(weights, args.indices, args.offsets, optional_list(psw),
                                                 args.padding_idx, args.mode, args.include_last_offset, args.dtype);
        bool psw_grads = false;
        for (const at::Tensor &w : psw) psw_grads = psw_grads || (w.defined() && w.requires_grad());
        // The tables are read back only for the per_sample_weights' gradient; otherwise their shapes do.
        variable_list saved(psw.begin(), psw.end());
        std::vector<at::Tensor> shapes;
        for (const at::Tensor &w : weights) {
            if (psw_grads) {
                saved.push_back(w);
            } else {
                shapes.push_back(at::empty({1, 1}, w.options().requires_grad(false)).expand(w.sizes()));
            }
        }
        ctx->save_for_backward(saved);
        ctx->saved_data["shapes"] = shapes;
        ctx->saved_data["indices"] = args.indices;
        ctx->saved_data["offsets"] = args.offsets;
        ctx->saved_data["padding_idx"] = args.padding_idx;
        ctx->saved_data["mode"] = args.mode;
        ctx->saved_data["include_last_offset"] = args.include_last_offset;
        ctx->saved_data["sparse"] = args.sparse;
        ctx->saved_data["psw_grads"] = psw_grads;
        ctx->saved_data["psw_table"] = args.psw_table;
        return out;
    }

    static variable_list backward(AutogradContext *ctx, variable_list grad_outputs) {
        const variable_list saved = ctx->get_saved_variables();
        const size_t n = grad_outputs.size();
        const variable_list psw(saved.begin(), saved.begin() + static_cast<std::ptrdiff_t>(n));
        const bool psw_grads = ctx->saved_data["psw_grads"].toBool();
        const variable_list weights =
            psw_grads ? variable_list(saved.begin() + static_cast<std::ptrdiff_t>(n), saved.end())
                      : ctx->saved_data["shapes"].toTensorVector();
        bool weight_grads = false;
        for (size_t t = 0; t < n; ++t) weight_grads = weight_grads || ctx->needs_input_grad(t);
        const std::vector<int64_t> padding = ctx->saved_data["padding_idx"].toIntVector();
        auto [weight_out, psw_out] = merged_embedding_bag_backward(
            grad_outputs, weights, ctx->saved_data["indices"].toTensorVector(),
            ctx->saved_data["offsets"].toTensorVector(), optional_list(psw), padding,
            ctx->saved_data["mode"].toInt(), ctx->saved_data["include_last_offset"].toBool(),
            ctx->saved_data["sparse"].toBool(), weight_grads, psw_grads);
        const std::vector<int64_t> psw_table = ctx->saved_data["psw_table"].toIntVector();
        variable_list grads(n + psw_table.size() + 1);  // weights, the given per_sample_weights, the rest
        for (size_t t = 0; t < n; ++t) {
            if (weight_grads && ctx->needs_input_grad(t)) grads[t] = weight_out[t];
        }
        for (size_t k = 0; k < psw_table.size() && psw_grads; ++k) {
            if (ctx->needs_input_grad(n + k)) grads[n + k] = psw_out[psw_table[k]];
        }
        return grads;
    }
};

std::vector<at::Tensor> merged_embedding_bag_autograd(at::TensorList weights, at::TensorList indices,
                                                      at::TensorList offsets,
                                                      const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                                      at::IntArrayRef padding_idx, int64_t mode,
                                                      bool include_last_offset, c10::optional<at::ScalarType> dtype,
                                                      bool sparse) {
    std::vector<at::Tensor> psw;
    std::vector<int64_t> psw_table;
    bool needs_grad = false;
    for (const at::Tensor &w : weights) needs_grad = needs_grad || w.requires_grad();
    for (size_t t = 0; t < per_sample_weights.size(); ++t) {
        const c10::optional<at::Tensor> w = per_sample_weights.get(t);
        if (!w || !w->defined()) continue;
        psw.push_back(*w);
        psw_table.push_back(static_cast<int64_t>(t));
        needs_grad = needs_grad || w->requires_grad();
    }
    if (!needs_grad || !at::GradMode::is_enabled()) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        return merged_embedding_bag(weights, indices, offsets, per_sample_weights, padding_idx, mode,
                                    include_last_offset, dtype);
    }
    IPEX_CHECK_INPUT(per_sample_weights.size() == weights.size(),
                     "merged_embedding_bag: one entry per table in each list: ", weights.size(), " weights, ",
                     per_sample_weights.size(), " per_sample_weights");
    BagArgs args;
    args.indices = indices.vec();
    args.offsets = offsets.vec();
    args.padding_idx = padding_idx.vec();
    args.mode = mode;
    args.include_last_offset = include_last_offset;
    args.dtype = dtype;
    args.sparse = sparse;
    args.psw_table = std::move(psw_table);
    return MergedEmbeddingBagFunction::apply(weights, at::TensorList(psw), args);
}

}  // namespace

// The forward as registered: `sparse` only chooses the layout of the weights' gradient.
std::vector<at::Tensor> merged_embedding_bag_op(at::TensorList weights, at::TensorList indices, at::TensorList offsets,
                                                const c10::List<c10::optional<at::Tensor>> &per_sample_weights,
                                                at::IntArrayRef padding_idx, int64_t mode, bool include_last_offset,
                                                c10::optional<at::ScalarType> dtype, bool /*sparse*/) {
    return merged_embedding_bag(weights, indices, offsets, per_sample_weights, padding_idx, mode, include_last_offset,
                                dtype);
}

}  // namespace ipex::ops::recsys

TORCH_LIBRARY_IMPL(ipex, Autograd, m) {
    m.impl("merged_embedding_bag", IPEX_GUARDED(ipex::ops::recsys::merged_embedding_bag_autograd));
}
