// Argument checks the merged EmbeddingBag's forward and backward share.
#pragma once

#include <ATen/ATen.h>

namespace ipex::ops::recsys {

// Table t's offsets as a contiguous int64 tensor, checked (an input error naming `op` and the
// table otherwise): starting at 0, non-decreasing, none past the `numel` indices, and at least
// one with include_last_offset.
at::Tensor checked_offsets(const char *op, int64_t t, const at::Tensor &offsets, int64_t numel,
                           bool include_last_offset);

}  // namespace ipex::ops::recsys
