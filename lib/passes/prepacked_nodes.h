// Reading and rewriting the ipex prepacked-op nodes that prepack_weights creates: which
// context a node holds, and swapping it for one with more post-ops. Shared by the fusion passes.
#pragma once

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace ipex::passes {

// ipex::convolution, convolution_sum(_), linear or linear_binary.
bool is_prepacked(const torch::jit::Node *node);
bool is_prepacked_conv(const torch::jit::Node *node);
bool is_prepacked_linear(const torch::jit::Node *node);

// The context constant of a prepacked node (its last input).
c10::intrusive_ptr<ops::ConvolutionContext> conv_context(const torch::jit::Node *node);
c10::intrusive_ptr<ops::LinearContext> linear_context(const torch::jit::Node *node);
const ops::PostOps &post_ops_of(const torch::jit::Node *node);

// Makes `node` use `context` (a new constant at the top of the graph).
void set_context(torch::jit::Graph &graph, torch::jit::Node *node, const c10::IValue &context);

// The only user of `value` when it has exactly one use (a graph output counts as a use).
torch::jit::Node *single_user(const torch::jit::Value *value);

// The arguments of a max pooling of `kind` (ipex::max_pool2d, aten::max_pool2d: input,
// kernel_size, stride, padding, dilation, ceil_mode) that alone reads `producer`'s output, in the
// same block, when they are constants: kernel_size, stride, padding, dilation, ceil_mode; that
// pooling in *pool.
std::optional<std::vector<c10::IValue>> pool_after(const torch::jit::Node *producer, const char *kind,
                                                   torch::jit::Node **pool);

// Replaces `node` by `kind(inputs...)` with the same output uses, scope and call stack.
torch::jit::Node *replace_node(torch::jit::Graph &graph, torch::jit::Node *node, const char *kind,
                               const std::vector<torch::jit::Value *> &inputs);

}  // namespace ipex::passes

namespace ipex::passes {

// `user` combining a prepacked op's output with another tensor: aten::add/add_ (Tensor
// overload, constant alpha) or aten::mul/mul_.
struct BinaryUse {
    std::string op;               // "add" or "mul"
    torch::jit::Value *other = nullptr;
    double alpha = 1.0;           // add: result = self + alpha * other
    bool output_first = true;     // the prepacked output is `self`
};

// The binary use, or nullopt with `why` set when `user` is such an op that cannot fuse
// (in-place into the other operand, non-constant alpha, shapes that would broadcast the
// output) and left empty when `user` is not an add/mul at all.
std::optional<BinaryUse> binary_use(const torch::jit::Node *producer, const torch::jit::Node *user, std::string *why);

// What `reject` returns for an op another pass handles (not reported as skipped).
constexpr const char *kNotThisPass = "-";

// The alias analysis of a graph for a fusion pass, built when first asked for and shared by
// the checks of one candidate and of the candidates after it, until the pass changes the
// graph (then `invalidate()`; moves made through the AliasDb itself keep it valid).
class LazyAliasDb {
public:
    explicit LazyAliasDb(std::shared_ptr<torch::jit::Graph> graph) : graph_(std::move(graph)) {}
    torch::jit::AliasDb &get();
    void invalidate() { db_.reset(); }

private:
    std::shared_ptr<torch::jit::Graph> graph_;
    std::unique_ptr<torch::jit::AliasDb> db_;
};

// For the fusion passes: the add/mul that is the only user of prepacked `node`, when
// `reject(use)` returns "" and the fused op may run where that user is (nothing in between
// writes to the node's input); `node` is then moved to just before the user. Otherwise
// nullopt, with the reason (if the user is such an op) appended to `skipped`.
std::optional<std::pair<torch::jit::Node *, BinaryUse>> take_binary_user(
    LazyAliasDb &aliases, torch::jit::Node *node, const std::function<std::string(const BinaryUse &)> &reject,
    std::vector<std::string> &skipped);

}  // namespace ipex::passes
