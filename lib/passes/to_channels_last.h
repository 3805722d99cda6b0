// Gives constant 4-D conv weights the channels_last layout (5-D: channels_last_3d) so oneDNN
// runs the convs in NHWC and the layout flows on. Needs a frozen graph; no-op without
// constant-weight convs. Conv kinds through which this libtorch does not keep the layout
// (probed once; 1.13: conv3d and conv-transpose) are left alone and reported as skipped.
// A graph input whose known rank (after shape specialization) equals the weight rank of a
// conv it feeds gets one memory-format conversion at the entry; inputs of unknown rank are
// never converted (conv2d also takes unbatched 3-D input).
// count = weights converted + entry conversions.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult to_channels_last(std::shared_ptr<torch::jit::Graph> &graph);

// Whether a conv with channels-last input and weight yields a channels-last output on this
// libtorch for the given weight rank (4 or 5) and direction.
bool conv_keeps_channels_last(int64_t weight_rank, bool transposed);

}  // namespace ipex::passes
