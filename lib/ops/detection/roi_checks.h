// The argument checks the RoI ops share (roi_align, ps_roi_align, roi_pool): every refusal is an
// input error naming the op and the argument (exit 3).
#pragma once

#include <ATen/ATen.h>

#include <cmath>

#include "ops/op_errors.h"

namespace ipex::ops::detection {

// input [N, C, H, W] of a floating dtype, rois [K, 5] floating, pooled sizes >= 0, a finite
// spatial_scale.
inline void check_roi_args(const char *op, const at::Tensor &input, const at::Tensor &rois, double spatial_scale,
                           int64_t pooled_h, int64_t pooled_w) {
    IPEX_CHECK_INPUT(input.dim() == 4, op, ": input must be [N, C, H, W], got ", input.dim(), " dims ",
                     input.sizes());
    IPEX_CHECK_INPUT(input.is_floating_point(), op, ": input must be a floating tensor, got ", input.scalar_type());
    IPEX_CHECK_INPUT(rois.dim() == 2 && rois.size(1) == 5, op,
                     ": rois must be [K, 5] (batch index, x1, y1, x2, y2), got ", rois.sizes());
    IPEX_CHECK_INPUT(rois.is_floating_point(), op, ": rois must be a floating tensor, got ", rois.scalar_type());
    IPEX_CHECK_INPUT(pooled_h >= 0 && pooled_w >= 0, op, ": pooled size must not be negative, got ", pooled_h, " x ",
                     pooled_w);
    IPEX_CHECK_INPUT(std::isfinite(spatial_scale), op, ": spatial_scale must be finite, got ", spatial_scale);
}

// rois as a contiguous T tensor, each row's coordinates finite and its batch index (truncated
// toward zero, as torchvision reads it) an image of the input's `images`.
template <typename T>
at::Tensor checked_rois(const char *op, const at::Tensor &rois, int64_t images) {
    const at::Tensor r = rois.to(c10::CppTypeToScalarType<T>::value).contiguous();
    const T *p = r.data_ptr<T>();
    for (int64_t k = 0; k < r.size(0); ++k, p += 5) {
        for (int j = 0; j < 5; ++j)
            IPEX_CHECK_INPUT(std::isfinite(static_cast<double>(p[j])), op, ": box ", k, " has a non-finite value ",
                             static_cast<double>(p[j]));
        const double index = std::trunc(static_cast<double>(p[0]));
        IPEX_CHECK_INPUT(index >= 0 && index < static_cast<double>(images), op, ": box ", k, " has batch index ",
                         static_cast<double>(p[0]), " but the input has ", images, " image(s)");
    }
    return r;
}

}  // namespace ipex::ops::detection
