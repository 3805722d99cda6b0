// Merges the aten::embedding_bag calls of a block that pool constant tables the same way (sum or
// mean, include_last_offset, and the index dtype where the graph knows it) into one
// ipex::merged_embedding_bag, placed after the last of them: a DLRM's N tables become one call.
// quantized::embedding_bag_byte_rowwise_offsets calls (sum, prepacked constant tables, offsets
// given, not pruned) merge too: their tables are the merged op's uint8 row-wise layout.
// Needs a frozen graph (constant tables) and libipex_ops.so. TableOptions: bf16 (optimize
// --dtype bf16) stores fp32 tables in bf16; uint8_rowwise (--embedding-int8) stores fp32 and
// bf16 tables as uint8 rows with a per-row fp32 scale and bias, even a lone table. The merged op
// returns the dtype the replaced calls did. Left alone: max pooling, tables that are not
// constant fp32/bf16 matrices, calls whose offset2bag/bag_size/max_indices outputs are read,
// per_sample_weights with mean, a padding_idx outside the table, byte calls with mode 1 (aten
// pools them as sums), calls that cannot be brought together without reordering a side effect,
// a group of one that is not converted. details: tables, table_bytes_before/after (each table
// once), uint8_tables.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

// How the merged op stores the tables it takes.
struct TableOptions {
    bool bf16 = false;           // fp32 tables in bf16
    bool uint8_rowwise = false;  // fp32 and bf16 tables as uint8 rows, a scale and a bias each
};

PassResult merge_embedding_bags(std::shared_ptr<torch::jit::Graph> &graph, const TableOptions &options);

}  // namespace ipex::passes
