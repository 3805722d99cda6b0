// ipex::convolution_graph(input, contexts, program): prepacked convolutions that read one
// another's outputs and the op's input and nothing else, residual sums included (the bottleneck
// blocks of a ResNet stage: conv1 -> conv2 -> conv3 + x, a downsample convolution of x for the
// first one), run by the program of ops/graph_program.h: the whole batch at once, or where its
// activations outgrow the cache a few images at a time, piece by piece. group_convolutions
// (passes/group_convolutions.h) puts it in place of such runs of ipex::convolution /
// convolution_sum(_). A convolution's sum writes over its summand (in place, as
// ipex::convolution_sum_) only where nothing later reads the summand and the context allows it.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "ops/conv_chain_op.h"
#include "ops/graph_program.h"

namespace ipex::ops {

at::Tensor convolution_graph(const at::Tensor &input, const ConvChain &contexts, at::IntArrayRef program);

// The program's steps for these contexts (what the profiler counts FLOPs with).
std::vector<GraphStep> convolution_steps(const ConvChain &contexts);

}  // namespace ipex::ops
