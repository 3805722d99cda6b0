// Merges the aten::embedding_bag calls of a block that pool constant tables the same way (sum or
// mean, include_last_offset, and the index dtype where the graph knows it) into one
// ipex::merged_embedding_bag, placed after the last of them: a DLRM's N tables become one call.
// Needs a frozen graph (constant tables) and libipex_ops.so. With bf16_tables (optimize --dtype
// bf16) fp32 tables are stored in bf16 in the merged op, which still returns fp32 as the calls
// it replaces did. Left alone: max pooling, tables that are not constant fp32/bf16 matrices,
// calls whose offset2bag/bag_size/max_indices outputs are read, per_sample_weights with mean, a
// padding_idx outside the table, calls that cannot be brought together without reordering a
// side effect, a group of one. No-op when fewer than two calls match.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult merge_embedding_bags(std::shared_ptr<torch::jit::Graph> &graph, bool bf16_tables);

}  // namespace ipex::passes
