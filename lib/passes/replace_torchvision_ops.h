// Replaces the torchvision:: detection ops a scripted detector calls (roi_align, nms,
// ps_roi_align, roi_pool) by their ipex:: twins (ops/detection/detection_ops.h), so the optimized
// model runs the ops library's kernels also in a process where torchvision's own library defines
// those names (Python that imported torchvision first), and cast_to_lowp can run RoIAlign in
// bf16. Same schemas and results; ipex::roi_align returns its input's memory format, so a read
// that sees strides (view, stride, is_contiguous, as_strided) gets a contiguous copy of it.
// Needs libipex_ops.so. No-op when the graph calls none of them.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult replace_torchvision_ops(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
