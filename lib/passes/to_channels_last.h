// Gives 4-D conv weights (constants) the channels_last layout, and 5-D ones channels_last_3d,
// so oneDNN runs the convs in NHWC and the layout flows on to the following ops. Where a
// graph input has a known rank equal to the conv's weight rank (after shape specialization)
// and feeds a converted conv, one memory-format conversion is inserted at the entry; inputs of
// unknown rank (conv2d also takes unbatched 3-D input) are never converted. A conv kind is
// converted only if this libtorch keeps the layout through it (probed once: 1.13 does for
// conv2d, not for conv3d or conv-transpose); the rest are reported as skipped. Needs a frozen
// graph; no-op without constant-weight convs. count = weights converted + entry conversions.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "passes/pass_result.h"

namespace ipex::passes {

PassResult to_channels_last(std::shared_ptr<torch::jit::Graph> &graph);

// Whether a conv with channels-last input and weight yields a channels-last output on this
// libtorch for the given weight rank (4 or 5) and direction.
bool conv_keeps_channels_last(int64_t weight_rank, bool transposed);

}  // namespace ipex::passes
