// The recommendation ops as ipex:: ops (recsys_ops.h).
#include <torch/library.h>

#include "ops/op_errors.h"
#include "ops/recsys/recsys_ops.h"

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    using namespace ipex::ops::recsys;
    // padding_idx: one row per table, -1 for none (the pass normalizes aten's negative ones);
    // mode: 0 sum, 1 mean; dtype: the outputs' dtype, default the tables'.
    m.def(
        "merged_embedding_bag(Tensor[] weights, Tensor[] indices, Tensor[] offsets, Tensor?[] per_sample_weights, "
        "int[] padding_idx, int mode, bool include_last_offset, ScalarType? dtype=None) -> Tensor[]",
        IPEX_GUARDED(merged_embedding_bag));
    m.def(
        "interaction(Tensor[] features, int[]? view_size, Tensor? rows, Tensor? cols, int tril_offset=-1, "
        "ScalarType? dtype=None) -> Tensor",
        IPEX_GUARDED(interaction));
}
