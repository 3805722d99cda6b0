// A concatenation along channels read only by 1x1 convolutions (and by max pools read only by
// such convolutions) need not be made: each convolution becomes one per concatenated part,
// its weight's input columns split the same way, summed:
//
//   conv1x1(cat([a, b], 1), W, bias)   ->  conv1x1(a, W[:, :ca], bias) + conv1x1(b, W[:, ca:])
//   conv1x1(max_pool2d(cat([a, b], 1)))  ->  the same over max_pool2d(a), max_pool2d(b)
//
// (a max pool works per channel). The same FLOPs; the concatenation's write and read are
// saved, and the sums run as oneDNN's sum post-op once prepacked (fuse_conv_sum), each
// reading and writing its output once more. Applied when that moves less data than the cat:
// (parts - 1) x (the convolutions' output channels, summed) < the cat's channels (SqueezeNet's
// fire modules: 2 parts, one 16-64 channel squeeze of 128-512). Only 2-D convolutions with constant
// weights, 1x1, stride 1, no padding, one group; the parts' channels must be known (from
// their types or the convolutions that make them). Prepacked mode only, before the dtype
// cast. count = cats removed.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

// details: {"cats_removed": n, "convs_split": n, "pools_split": n}
PassResult split_cat_conv(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
