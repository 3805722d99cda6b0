// Position-sensitive RoIAlign and RoI max pooling: torchvision's definitions, portable code over
// contiguous NCHW data (fp64 in fp64, other dtypes in fp32), parallel over boxes.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/detection/detection_ops.h"
#include "ops/detection/roi_align_kernel.h"
#include "ops/detection/roi_checks.h"

namespace ipex::ops::detection {
namespace {

template <typename T>
std::tuple<at::Tensor, at::Tensor> ps_roi_align_impl(const at::Tensor &input, const at::Tensor &rois_t,
                                                     double spatial_scale, int64_t pooled_h, int64_t pooled_w,
                                                     int64_t sampling_ratio) {
    const at::Tensor src_t = input.to(c10::CppTypeToScalarType<T>::value).contiguous();
    const int64_t rois = rois_t.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
    const int64_t bins = pooled_h * pooled_w, channels_out = channels / bins;
    at::Tensor out = at::empty({rois, channels_out, pooled_h, pooled_w}, src_t.options());
    at::Tensor mapping = at::empty({rois, channels_out, pooled_h, pooled_w}, src_t.options().dtype(at::kInt));
    const T *src = src_t.data_ptr<T>(), *roi_data = rois_t.data_ptr<T>();
    T *dst = out.data_ptr<T>();
    int32_t *map = mapping.data_ptr<int32_t>();
    at::parallel_for(0, rois, 1, [&](int64_t begin, int64_t end) {
        std::vector<Sample<T>> samples;
        for (int64_t k = begin; k < end; ++k) {
            const T *roi = roi_data + k * 5;
            BoxGrid<T> g;
            // Always aligned (half-pixel offset, no 1 x 1 floor); the mean divides by the grid
            // size even when it is 0, as torchvision does.
            IPEX_CHECK_INPUT(box_grid(roi + 1, static_cast<T>(spatial_scale), pooled_h, pooled_w, sampling_ratio,
                                      /*aligned=*/true, &g),
                             "ps_roi_align: box ", k, " needs more than ", kMaxSamplesPerBin,
                             " sampling points per bin; give a sampling_ratio or clip the boxes to the image");
            box_samples(g, height, width, pooled_h, pooled_w, &samples);
            const int64_t per_bin = static_cast<int64_t>(samples.size()) / bins;
            const T count = static_cast<T>(g.grid_h * g.grid_w);
            const int64_t image = static_cast<int64_t>(roi[0]);
            for (int64_t c_out = 0; c_out < channels_out; ++c_out) {
                for (int64_t bin = 0; bin < bins; ++bin) {
                    const int64_t c_in = c_out * bins + bin, index = (k * channels_out + c_out) * bins + bin;
                    const T *plane = src + (image * channels + c_in) * height * width;
                    const Sample<T> *s = samples.data() + bin * per_bin;
                    T sum = 0;
                    for (int64_t j = 0; j < per_bin; ++j, ++s)
                        sum += s->w[0] * plane[s->pos[0]] + s->w[1] * plane[s->pos[1]] + s->w[2] * plane[s->pos[2]] +
                               s->w[3] * plane[s->pos[3]];
                    dst[index] = sum / count;
                    map[index] = static_cast<int32_t>(c_in);
                }
            }
        }
    });
    return {out.to(input.scalar_type()), mapping};
}

template <typename T>
std::tuple<at::Tensor, at::Tensor> roi_pool_impl(const at::Tensor &input, const at::Tensor &rois_t,
                                                 double spatial_scale, int64_t pooled_h, int64_t pooled_w) {
    const at::Tensor src_t = input.to(c10::CppTypeToScalarType<T>::value).contiguous();
    const int64_t rois = rois_t.size(0), channels = input.size(1);
    const int height = static_cast<int>(input.size(2)), width = static_cast<int>(input.size(3));
    at::Tensor out = at::empty({rois, channels, pooled_h, pooled_w}, src_t.options());
    at::Tensor argmax = at::empty({rois, channels, pooled_h, pooled_w}, src_t.options().dtype(at::kInt));
    const T *src = src_t.data_ptr<T>(), *roi_data = rois_t.data_ptr<T>();
    T *dst = out.data_ptr<T>();
    int32_t *arg = argmax.data_ptr<int32_t>();
    const T scale = static_cast<T>(spatial_scale);
    at::parallel_for(0, rois, 1, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) {
            const T *roi = roi_data + k * 5;
            const int64_t image = static_cast<int64_t>(roi[0]);
            // Rounded box corners (half away from zero) clamped to a range an int holds: beyond
            // the map every bin is empty anyway.
            auto corner = [&](T v) {
                const double r = std::round(static_cast<double>(v * scale));
                return static_cast<int>(std::clamp(r, -5e8, 5e8));
            };
            const int start_w = corner(roi[1]), start_h = corner(roi[2]);
            const int end_w = corner(roi[3]), end_h = corner(roi[4]);
            const int roi_w = std::max(end_w - start_w + 1, 1), roi_h = std::max(end_h - start_h + 1, 1);
            const T bin_h = static_cast<T>(roi_h) / static_cast<T>(pooled_h);
            const T bin_w = static_cast<T>(roi_w) / static_cast<T>(pooled_w);
            for (int64_t ph = 0; ph < pooled_h; ++ph) {
                for (int64_t pw = 0; pw < pooled_w; ++pw) {
                    int hstart = static_cast<int>(std::floor(static_cast<T>(ph) * bin_h));
                    int wstart = static_cast<int>(std::floor(static_cast<T>(pw) * bin_w));
                    int hend = static_cast<int>(std::ceil(static_cast<T>(ph + 1) * bin_h));
                    int wend = static_cast<int>(std::ceil(static_cast<T>(pw + 1) * bin_w));
                    hstart = std::min(std::max(hstart + start_h, 0), height);
                    hend = std::min(std::max(hend + start_h, 0), height);
                    wstart = std::min(std::max(wstart + start_w, 0), width);
                    wend = std::min(std::max(wend + start_w, 0), width);
                    const bool empty = hend <= hstart || wend <= wstart;
                    for (int64_t c = 0; c < channels; ++c) {
                        const T *plane = src + (image * channels + c) * height * width;
                        T best = empty ? T(0) : T(-FLT_MAX);
                        int best_at = -1;
                        for (int h = hstart; h < hend; ++h) {
                            for (int w = wstart; w < wend; ++w) {
                                const int at = h * width + w;
                                if (plane[at] > best) {
                                    best = plane[at];
                                    best_at = at;
                                }
                            }
                        }
                        const int64_t index = ((k * channels + c) * pooled_h + ph) * pooled_w + pw;
                        dst[index] = best;
                        arg[index] = best_at;
                    }
                }
            }
        }
    });
    return {out.to(input.scalar_type()), argmax};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> ps_roi_align(const at::Tensor &input, const at::Tensor &rois,
                                                double spatial_scale, int64_t pooled_h, int64_t pooled_w,
                                                int64_t sampling_ratio) {
    constexpr const char *kOp = "ps_roi_align";
    check_roi_args(kOp, input, rois, spatial_scale, pooled_h, pooled_w);
    IPEX_CHECK_INPUT(sampling_ratio >= 0 && sampling_ratio <= kMaxSamplesPerBin / std::max<int64_t>(sampling_ratio, 1),
                     kOp, ": sampling_ratio must be 0 (adaptive) or a positive grid of at most ", kMaxSamplesPerBin,
                     " points, got ", sampling_ratio);
    IPEX_CHECK_INPUT(pooled_h > 0 && pooled_w > 0 && input.size(1) % (pooled_h * pooled_w) == 0, kOp,
                     ": the input's channels (", input.size(1), ") must be a multiple of pooled_h * pooled_w (",
                     pooled_h, " x ", pooled_w, ")");
    const int64_t channels_out = input.size(1) / (pooled_h * pooled_w);
    if (rois.size(0) * channels_out == 0 || input.size(2) == 0 || input.size(3) == 0)
        return {at::zeros({rois.size(0), channels_out, pooled_h, pooled_w}, input.options()),
                at::zeros({rois.size(0), channels_out, pooled_h, pooled_w}, input.options().dtype(at::kInt))};
    if (input.scalar_type() == at::kDouble)
        return ps_roi_align_impl<double>(input, checked_rois<double>(kOp, rois, input.size(0)), spatial_scale,
                                         pooled_h, pooled_w, sampling_ratio);
    return ps_roi_align_impl<float>(input, checked_rois<float>(kOp, rois, input.size(0)), spatial_scale, pooled_h,
                                    pooled_w, sampling_ratio);
}

std::tuple<at::Tensor, at::Tensor> roi_pool(const at::Tensor &input, const at::Tensor &rois, double spatial_scale,
                                            int64_t pooled_h, int64_t pooled_w) {
    constexpr const char *kOp = "roi_pool";
    check_roi_args(kOp, input, rois, spatial_scale, pooled_h, pooled_w);
    IPEX_CHECK_INPUT(input.numel() < std::numeric_limits<int32_t>::max(), kOp,
                     ": the input has more elements than the int32 argmax can index (", input.numel(), ")");
    const int64_t rois_n = rois.size(0), channels = input.size(1);
    if (rois_n * channels * pooled_h * pooled_w == 0)
        return {at::zeros({rois_n, channels, pooled_h, pooled_w}, input.options()),
                at::zeros({rois_n, channels, pooled_h, pooled_w}, input.options().dtype(at::kInt))};
    if (input.scalar_type() == at::kDouble)
        return roi_pool_impl<double>(input, checked_rois<double>(kOp, rois, input.size(0)), spatial_scale, pooled_h,
                                     pooled_w);
    return roi_pool_impl<float>(input, checked_rois<float>(kOp, rois, input.size(0)), spatial_scale, pooled_h,
                                pooled_w);
}

}  // namespace ipex::ops::detection
