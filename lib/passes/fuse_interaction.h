// Fuses DLRM's dot interaction into one ipex::interaction: the features stacked
// (torch.stack(features, 1), or torch.cat(features, 1).view(B, -1, D)), Z = bmm(T, T.transpose(1,
// 2)) (or matmul, permute(0, 2, 1)), the gathered pairs Z[:, rows, cols] (constant index lists, any
// index tensors, or torch.tril_indices over Z's own size), and the concatenation of the first
// feature with them (torch.cat([x, Zflat], 1)). Feature lists may be built with appends and list
// additions ([x] + ly); the casts cast_to_lowp puts before a bf16 bmm become the op's dtype. Only
// the dot products the gather reads are computed, and T and Z are not made unless something else
// reads them. Needs libipex_ops.so; no-op when no concatenation ends such a pattern. Left alone: a
// first feature that is not the dense vector concatenated after, a bmm of two different tensors,
// a gather over other dims, and the interaction written as one dot product a pair ((a * b).sum(1)
// for each pair, stacked: a Python loop unrolled by tracing), which is named in skipped.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fuse_interaction(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
