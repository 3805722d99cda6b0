// Runs of prepacked convolutions that read only one another's outputs and one value from before
// the run, residual sums included, with at least one sum:
//
//   a = ipex::convolution(x, c1); b = ipex::convolution(a, c2); d = ipex::convolution(x, c4)
//   y = ipex::convolution_sum_(b, d, c3)          (a, b, d read by nothing else)
//     ->  y = ipex::convolution_graph(x, [c1, c2, c4, c3], [0, -1, 1, -1, 0, -1, 2, 3])
//
// (ops/conv_graph_op.h: the same convolutions, run a few images at a time when a batch's
// activations would not stay in cache, as the 56x56 and 28x28 stages of a ResNet at batch 16).
// A run is the longest stretch of such nodes the graph holds one after the other (anything else
// between them ends it, prim::Constant aside, and so does a depthwise convolution: MobileNet-
// style blocks stay with chain_convolutions), cut at its longest start whose only value read
// after it is its last output; the op runs where the last convolution was (every node it
// replaces sits between it and the first, so nothing else runs in between). Prepacked mode only;
// run after the fusions (each context holds its post-ops) and before chain_convolutions, which
// takes what is left.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

// details: {"graphs": ops made, "convolutions": convolutions in them, "sums": of which with a
// residual sum}; count: ops made; modules: "first..last (N convolutions)" per op.
PassResult group_convolutions(std::shared_ptr<torch::jit::Graph> &graph);

// The same over other ops of that shape (input first, summand second, a constant context last):
// `member` tells the ops a run may hold, `has_summand` those whose second input is a summand, and
// `op` names the graph op made (ops/int8/int8_graph.h groups int8 convolutions this way).
struct GroupFamily {
    bool (*member)(const torch::jit::Node *);
    bool (*has_summand)(const torch::jit::Node *);
    const char *op;
};
PassResult group_runs(std::shared_ptr<torch::jit::Graph> &graph, const GroupFamily &family);

}  // namespace ipex::passes
