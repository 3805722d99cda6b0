// The recommendation ops as ipex:: ops (recsys_ops.h).
#include <torch/library.h>

#include "ops/op_errors.h"
#include "ops/recsys/recsys_ops.h"

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    using namespace ipex::ops::recsys;
    // padding_idx: one row per table, -1 for none (the pass normalizes aten's negative ones);
    // mode: 0 sum, 1 mean; dtype: the outputs' dtype, default the tables'; sparse: the tables'
    // gradients are sparse COO tensors (nn.EmbeddingBag(sparse=True)), else dense. Autograd's
    // kernel is in merged_embedding_bag_autograd.cpp.
    m.def(
        "merged_embedding_bag(Tensor[] weights, Tensor[] indices, Tensor[] offsets, Tensor?[] per_sample_weights, "
        "int[] padding_idx, int mode, bool include_last_offset, ScalarType? dtype=None, bool sparse=False) -> Tensor[]");
    // Not a catch-all kernel: autograd would take that one in place of ours.
    m.impl("merged_embedding_bag", c10::DispatchKey::CompositeExplicitAutograd, IPEX_GUARDED(merged_embedding_bag_op));
    // The backward (recsys_ops.h); a list not asked for comes back empty.
    m.def(
        "merged_embedding_bag_backward(Tensor[] grad_outputs, Tensor[] weights, Tensor[] indices, Tensor[] offsets, "
        "Tensor?[] per_sample_weights, int[] padding_idx, int mode, bool include_last_offset, bool sparse, "
        "bool weight_grads=True, bool per_sample_weights_grads=True) -> (Tensor[], Tensor[])",
        IPEX_GUARDED(merged_embedding_bag_backward));
    m.def(
        "interaction(Tensor[] features, int[]? view_size, Tensor? rows, Tensor? cols, int tril_offset=-1, "
        "ScalarType? dtype=None) -> Tensor",
        IPEX_GUARDED(interaction));
}
