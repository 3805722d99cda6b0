// Helpers shared by the graph passes: op counts, constants, module paths, node walks.
// Everything here reads the graph except insert_constant_at_top, which adds one constant, and
// copy_origin, which labels a node a pass creates.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/op_kinds.h"

namespace ipex::passes {

// Node kinds ("aten::conv2d") and how often they occur, over all blocks; prim::Constant
// is not counted.
std::map<std::string, int> op_histogram(const torch::jit::Graph &graph);

// How many nodes of this kind the graph holds, over all blocks.
int count_op(const torch::jit::Graph &graph, const std::string &kind);

// The user's module path a node came from ("layer1.0.bn1"): the instance names of its
// inlined call stack, else the scope name of a traced graph, else "".
std::string module_path(const torch::jit::Node *node);

// module_path(node), or the node kind when the node came from no module.
std::string node_label(const torch::jit::Node *node);

// Values of prim::Constant nodes; nullopt when `value` is not such a constant (of that type).
std::optional<at::Tensor> constant_tensor(const torch::jit::Value *value);
std::optional<bool> constant_bool(const torch::jit::Value *value);
std::optional<int64_t> constant_int(const torch::jit::Value *value);
std::optional<double> constant_double(const torch::jit::Value *value);
std::optional<std::vector<int64_t>> constant_int_list(const torch::jit::Value *value);
bool is_constant_none(const torch::jit::Value *value);

// Input of `node` by schema argument name; nullptr when the node has no such argument.
torch::jit::Value *input_named(const torch::jit::Node *node, const char *name);
// Position of that input; nullopt when the node has no such argument.
std::optional<size_t> input_index(const torch::jit::Node *node, const char *name);

// All nodes of `block` and its sub-blocks, outer node before its blocks' nodes. A snapshot:
// callers may mutate the graph while walking the returned list.
std::vector<torch::jit::Node *> collect_nodes(torch::jit::Block *block);

// Nodes of the given kinds, over all blocks (snapshot, in program order).
std::vector<torch::jit::Node *> collect_nodes_of_kind(
    torch::jit::Block *block, const std::vector<torch::jit::Symbol> &kinds);

// True for ops that read only a tensor's metadata (dim, size, numel, dtype, device...), which
// a rewrite preserving shape and dtype leaves unchanged.
bool is_shape_query(const torch::jit::Node *node);

// True when every use of `value` other than by `user` is a shape query.
bool only_shape_queries_besides(const torch::jit::Value *value, const torch::jit::Node *user);

// True when `value` is returned by the graph, directly or inside tuples/lists it returns.
bool is_graph_output(const torch::jit::Value *value);

// Inserts a constant at the start of the graph's top block, so it dominates every use in
// every sub-block; copies the source range of `origin` when given.
torch::jit::Value *insert_constant_at_top(torch::jit::Graph &graph, const c10::IValue &value,
                                          const torch::jit::Node *origin = nullptr);

// Gives `created` the source range, inlined call stack and scope of `origin` (the node it
// replaces), so module paths in reports and inspect still name the user's module.
void copy_origin(torch::jit::Node *created, torch::jit::Node *origin);

// A tensor type with the dtype, device and rank of `type` but no sizes or strides (for
// values whose layout a pass changes); TensorType::get() when the rank is unknown.
c10::TypePtr rank_only_type(const c10::TypePtr &type);

// Rank of a tensor value when its type says so (shape-specialized or traced graphs).
std::optional<size_t> known_rank(const torch::jit::Value *value);

// The aten convolutions a scripted or traced graph can hold: conv1d/2d/3d,
// conv_transpose1d/2d/3d, _convolution and convolution (the op-kind table, ir/op_kinds.h).
using ir::aten_conv_kinds;
using ir::is_aten_conv;
bool is_aten_conv(const torch::jit::Node *node);
// Whether an aten convolution is transposed: fixed by its kind, or its `transposed`
// argument when that is a constant; nothing otherwise (not a convolution, or not constant).
std::optional<bool> conv_transposed(const torch::jit::Node *node);

// Schemas the passes rewrite exactly (a node of the same kind with another schema is left).
inline constexpr const char *kAtenCatSchema = "aten::cat(Tensor[] tensors, int dim=0) -> Tensor";
inline constexpr const char *kAtenMaxPool2dSchema =
    "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, "
    "bool ceil_mode=False) -> Tensor";

}  // namespace ipex::passes
