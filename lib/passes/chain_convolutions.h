// Runs of prepacked convolutions where each reads only the one before it:
//
//   y1 = ipex::convolution(x, c1); y2 = ipex::convolution(y1, c2)   (y1 read by nothing else)
//     ->  y2 = ipex::convolution_chain(x, [c1, c2])
//
// (ops/conv_chain_op.h: the same convolutions, run a few images at a time when a batch's
// activation between them would not stay in cache, as the 1x1 expansion before a depthwise
// convolution of MobileNet/EfficientNet-style blocks at 112x112). Chains are as long as the
// graph allows; a convolution whose output is also read elsewhere (a residual, a graph output)
// ends one. A chain, or a single convolution, whose output only an ipex::max_pool2d with
// constant arguments reads takes the pooling in too:
//
//   y = ipex::convolution(x, c1); z = ipex::max_pool2d(y, k, s, p, d, ceil)   (y read by nothing else)
//     ->  z = ipex::convolution_max_pool(x, [c1], k, s, p, d, ceil)
//
// (a stem's convolution and pooling: the pooling reads the convolution's output from cache). The chain runs where its first convolution was (a write to the chain's input after
// that one stays after the chain). Prepacked mode only; run after the fusions, so each
// context holds its post-ops.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <vector>

#include "ops/conv_context.h"
#include "ir/pass_result.h"

namespace ipex::passes {

// details: {"chains": chains made, "convolutions": convolutions in them, "pooled": chains that
// end in a pooling}; count: chains; modules: "first+second+...(+pool)" per chain.
PassResult chain_convolutions(std::shared_ptr<torch::jit::Graph> &graph);

// The contexts of an ipex::convolution_chain or ipex::convolution_max_pool node, in order.
std::vector<c10::intrusive_ptr<ops::ConvolutionContext>> chain_contexts(const torch::jit::Node *node);

}  // namespace ipex::passes
