// The ops torchvision's detection models call, for processes that do not load torchvision's
// library (ipex-tool, a libtorch program, Python without torchvision): RoIAlign, NMS,
// position-sensitive RoIAlign and RoI max pooling, with torchvision's schemas and results
// (batched_nms is TorchScript code over nms). detection_register.cpp registers them as ipex::
// ops always, and under torchvision::'s names when no library has defined those yet.
//
// Beyond torchvision's CPU kernels: bf16 data (fp32 arithmetic, one rounding of each output),
// rois of another floating dtype than the input, a channels-last input read in place (ipex::
// roi_align then returns channels-last too; the torchvision name keeps torchvision's
// contiguous result), every op parallel over boxes (RoIAlign also over channels). Refused with
// an input error (exit 3): wrong ranks or shapes, negative pooled sizes or sampling ratio, a
// box whose batch index is not an image of the input, non-finite boxes or scale, a box whose
// adaptive sampling grid exceeds roi_align_kernel.h's bound.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace ipex::ops::detection {

// input [N, C, H, W]; rois [K, 5]: (batch index, x1, y1, x2, y2). -> [K, C, pooled_h, pooled_w]
// in the input's memory format (keep_layout) or contiguous.
at::Tensor roi_align(const at::Tensor &input, const at::Tensor &rois, double spatial_scale, int64_t pooled_h,
                     int64_t pooled_w, int64_t sampling_ratio, bool aligned, bool keep_layout);

// boxes [N, 4] (x1, y1, x2, y2), scores [N] -> indices of the kept boxes (int64), by score
// descending: a box is dropped when its IoU with a kept higher-scored box exceeds iou_threshold.
at::Tensor nms(const at::Tensor &boxes, const at::Tensor &scores, double iou_threshold);

// input [N, C, H, W] with C = C_out * pooled_h * pooled_w -> ([K, C_out, pooled_h, pooled_w],
// the input channel each output read, int32).
std::tuple<at::Tensor, at::Tensor> ps_roi_align(const at::Tensor &input, const at::Tensor &rois,
                                                double spatial_scale, int64_t pooled_h, int64_t pooled_w,
                                                int64_t sampling_ratio);

// -> ([K, C, pooled_h, pooled_w] maxima over each bin's pixels (0 for an empty bin), the
// argmax's offset y * W + x in its channel, -1 when empty, int32).
std::tuple<at::Tensor, at::Tensor> roi_pool(const at::Tensor &input, const at::Tensor &rois, double spatial_scale,
                                            int64_t pooled_h, int64_t pooled_w);

// Whether this process's torchvision::roi_align is ours (no torchvision library was loaded
// before the ops library).
bool torchvision_names_registered();

}  // namespace ipex::ops::detection
