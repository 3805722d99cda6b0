// ipex::channel_shuffle(inputs, grouped, sizes): the channel shuffle of ShuffleNet-style models,
// torch.cat(inputs, 1).view(grouped).transpose(1, 2).contiguous().view(sizes) in one pass
// (fuse_channel_shuffle puts it in place of that chain; one input: no cat).
//
// When the inputs are 4-D fp32 or bf16 channels-last tensors of one dtype and batch and spatial
// size, grouped is [n, g, c / g, h, w] and sizes [n, c, h, w] (either may hold one -1), with g
// and c / g both at least 2, each output pixel's channels are gathered straight from the inputs
// (output channel j * g + i is input channel i * (c / g) + j of the concatenation) into a
// channels-last output: one read of the inputs and one write, where the chain writes the
// concatenation, copies it to the standard layout, then copies it transposed. Anything else
// runs the chain itself (with a contiguous() before the first view, as contiguous_before_view
// gives views of channels-last tensors), so errors are aten's. The output never aliases an
// input, as the chain's does not when g and c / g are at least 2.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include <vector>

namespace ipex::ops {

at::Tensor channel_shuffle(at::TensorList inputs, at::IntArrayRef grouped, at::IntArrayRef sizes);

// ipex::channel_shuffle_chunk(inputs, grouped, sizes, chunks): channel_shuffle(...).chunk(chunks, 1)
// (ShuffleNet v2 splits each shuffled tensor in two). On the gather path, when chunks divides
// the channels, each chunk is written as its own dense channels-last tensor instead of a view
// into the shuffled one, so the convolution reading it needs no copy; otherwise aten::chunk's
// views of channel_shuffle's result.
std::vector<at::Tensor> channel_shuffle_chunk(at::TensorList inputs, at::IntArrayRef grouped, at::IntArrayRef sizes,
                                              int64_t chunks);

// Whether channel_shuffle gathers these inputs itself (the tests ask).
bool channel_shuffle_gathers(at::TensorList inputs, at::IntArrayRef grouped, at::IntArrayRef sizes);

}  // namespace ipex::ops
