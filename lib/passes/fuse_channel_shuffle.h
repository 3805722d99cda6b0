// Prepacked mode: the channel shuffle of ShuffleNet-style models, written
//   x.view(n, g, c / g, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
// (view or reshape at either end, transpose(1, 2) / transpose(2, 1) / permute([0, 2, 1, 3, 4])
// in the middle, the contiguous optional before a reshape, a plain contiguous() before the
// first view joining too), becomes one
// ipex::channel_shuffle (ops/shuffle_op.h), which checks the sizes at run time and gathers the
// channels of channels-last fp32/bf16 tensors in one pass (the chain's definition otherwise).
// When x is an aten::cat along dim 1 read by nothing else but aten::size(x, d) queries (which
// are answered from the cat's inputs instead), the cat joins the op: the shuffled channels are
// gathered from the concatenated tensors directly. When the shuffled tensor's one reader is an
// aten::chunk along dim 1, the op is ipex::channel_shuffle_chunk, which writes each chunk as
// its own dense tensor (no copy before the convolution that reads it). Only chains whose
// intermediate tensors have no other reader, and whose result is not a graph output (whose
// layout the model keeps), are replaced. Runs before contiguous_before_view, which then treats the op's output as possibly
// channels-last. count = shuffles replaced; details: with_cat, with_chunk.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fuse_channel_shuffle(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
