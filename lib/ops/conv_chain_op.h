// ipex::convolution_chain(input, contexts): contexts[k-1](... contexts[1](contexts[0](input))),
// convolutions without a tensor post-op, each reading only its predecessor's output
// (chain_convolutions puts it in place of such runs of ipex::convolution: a 1x1 expansion and
// the depthwise convolution after it, a stem and the convolution after it).
//
// When a batch's largest activation between two of the convolutions is above the cache budget
// (chain_budget_bytes) and the chain computes at most kChainMaxFlopsPerByte FLOPs per byte of
// that activation (so its trip through memory is a real share of the time: a 1x1 expansion
// and a depthwise layer, 9-33 FLOPs per byte; not ResNet's 1x1 and 3x3 pair, about 400), the
// batch runs in a few equal parts of whole images, each part through
// the whole chain, so those activations stay in cache instead of going to memory and back; the
// last convolution writes each part straight into its slice of the batch's output. Images are
// computed independently by every convolution, so the result is the one of the convolutions
// run one after the other, which is also how the chain runs when the batch fits or the inputs
// are not what the contexts take (their own errors are raised then).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/List.h>

#include "ops/conv_context.h"

namespace ipex::ops {

using ConvChain = c10::List<c10::intrusive_ptr<ConvolutionContext>>;

constexpr double kChainMaxFlopsPerByte = 64;
// The same bound when a pooling ends the chain, whose input is written and read back whole
// (two trips through memory where the parts keep it in cache): ResNet's 7x7 stem (37 FLOPs per
// byte of its output in fp32, 74 in bf16) at batch 16 saved 1.9 ms fp32 / 1.0 ms bf16 in parts.
constexpr double kPoolMaxFlopsPerByte = 256;

at::Tensor convolution_chain(const at::Tensor &input, const ConvChain &contexts);

// ipex::convolution_max_pool(input, contexts, kernel_size, stride, padding, dilation, ceil_mode):
// ipex::max_pool2d (ops/pool_op.h) of convolution_chain(input, contexts), one or more
// convolutions (chain_convolutions puts it in place of a convolution or chain whose output
// only a max pooling reads: the stems of SqueezeNet, ResNet, GoogLeNet). The pooling's input
// counts as an activation of the chain, so a 4-D batch whose pooling input outgrows the cache
// budget (and whose chain is memory-bound by the rule above, with kPoolMaxFlopsPerByte) runs in parts of whole images,
// each through the convolutions and the pooling, which writes its slice of the batch's
// output: the convolutions' output is read back from cache, not memory (SqueezeNet's stem at
// batch 8 writes 25 MB in fp32 that the pooling reads again). Images are pooled independently,
// so the values are those of the convolutions and the pooling run one after the other (where
// oneDNN's pooling meets its lowest-value case, aten recomputes only that part).
at::Tensor convolution_max_pool(const at::Tensor &input, const ConvChain &contexts, at::IntArrayRef kernel_size,
                                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                bool ceil_mode);

// The bytes an activation between two convolutions of a chain may take before the batch is
// split: IPEX_CONV_CHAIN_BYTES when set (0: never split), else the L2 cache size of one core
// times the threads ATen runs (1 MiB when the size is not known).
int64_t chain_budget_bytes();

// Images per part for a batch of n whose largest intermediate activation takes
// per_image_bytes per image: n when it fits the budget whole or the budget is 0, else the
// batch in the fewest parts that fit (one image at least), made as equal as they can be.
int64_t chain_part_images(int64_t n, int64_t per_image_bytes, int64_t budget);

}  // namespace ipex::ops
