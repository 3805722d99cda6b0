// Names of the `ipex` TorchScript ops and classes, for graph passes and tests. The ops:
//   ipex::convolution(Tensor input, ConvolutionContext ctx) -> Tensor
//   ipex::convolution_sum(Tensor input, Tensor other, ConvolutionContext ctx) -> Tensor
//       (ctx has a "sum" post-op: out = conv(input) + scale * other, then later post-ops)
//   ipex::convolution_sum_(Tensor input, Tensor(a!) other, ConvolutionContext ctx) -> Tensor(a!)
//       (the same, computed in other's buffer: for an other nothing reads afterwards)
//   ipex::convolution_chain(Tensor input, ConvolutionContext[] contexts) -> Tensor
//       (the convolutions one after the other, a few images at a time: ops/conv_chain_op.h)
//   ipex::convolution_max_pool(Tensor input, ConvolutionContext[] contexts, int[] kernel_size,
//       int[] stride, int[] padding, int[] dilation, bool ceil_mode) -> Tensor
//       (ipex::max_pool2d of the chain's output, a few images at a time: ops/conv_chain_op.h)
//   ipex::convolution_graph(Tensor input, ConvolutionContext[] contexts, int[] program) -> Tensor
//       (convolutions with residual sums reading one another, a few images at a time:
//       ops/conv_graph_op.h)
//   ipex::linear(Tensor input, LinearContext ctx) -> Tensor
//   ipex::linear_binary(Tensor input, Tensor other, LinearContext ctx) -> Tensor
//       (ctx has an "add" or "mul" post-op with `other`, broadcast to the output)
//   ipex::lstm(Tensor input, Tensor[] hx, RnnContext ctx) -> (Tensor, Tensor, Tensor)
//   ipex::gru(Tensor input, Tensor? hx, RnnContext ctx) -> (Tensor, Tensor)
//       (aten::lstm/gru's outputs; an empty hx / None means zero initial states)
//   ipex::convolution_prepack(...) / ipex::linear_prepack(...) / ipex::rnn_prepack(...) build
//       contexts (for scripts).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include "ops/conv_context.h"
#include "ops/linear_context.h"
#include "ops/rnn_context.h"

namespace ipex::ops {

constexpr const char *kConvolution = "ipex::convolution";
constexpr const char *kConvolutionSum = "ipex::convolution_sum";
constexpr const char *kConvolutionSumInPlace = "ipex::convolution_sum_";
constexpr const char *kConvolutionChain = "ipex::convolution_chain";
constexpr const char *kConvolutionMaxPool = "ipex::convolution_max_pool";
constexpr const char *kConvolutionGraph = "ipex::convolution_graph";
constexpr const char *kLinear = "ipex::linear";
constexpr const char *kLinearBinary = "ipex::linear_binary";
constexpr const char *kLstm = "ipex::lstm";
constexpr const char *kGru = "ipex::gru";

// Whether oneDNN can run a `dtype` ("fp32", "bf32", "bf16", "fp16") convolution and linear on
// this CPU; the message says why not.
bool dtype_supported(const std::string &dtype, std::string *why);

}  // namespace ipex::ops
