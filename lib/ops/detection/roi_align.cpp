#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "base/isa.h"
#include "ops/detection/detection_ops.h"
#include "ops/detection/roi_align_channels_last.h"
#include "ops/detection/roi_checks.h"

namespace ipex::ops::detection {

void run_channels_last(const ChannelsLastProblem &p) { channels_last(p); }

namespace avx512 {
bool available(bool bf16) { return bf16 ? isa::avx512_bf16() : isa::avx512(); }
}  // namespace avx512

namespace {

constexpr const char *kOp = "roi_align";

using ChannelsLastKernel = void (*)(const ChannelsLastProblem &);

// The channels-last kernels, fastest first, each with what it needs; the portable one last.
ChannelsLastKernel choose_channels_last(bool bf16) {
    if (avx512::available(bf16)) return avx512::run_channels_last;
    if (isa::avx2_fma()) return avx2::run_channels_last;
    return run_channels_last;
}

template <typename T>
BoxGrid<T> grid_of(const T *roi, double spatial_scale, int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio,
                   bool aligned, int64_t k) {
    BoxGrid<T> g;
    IPEX_CHECK_INPUT(box_grid(roi + 1, static_cast<T>(spatial_scale), pooled_h, pooled_w, sampling_ratio, aligned, &g),
                     kOp, ": box ", k, " (", static_cast<double>(roi[1]), ", ", static_cast<double>(roi[2]), ", ",
                     static_cast<double>(roi[3]), ", ", static_cast<double>(roi[4]), ") at spatial_scale ",
                     spatial_scale, " needs more than ", kMaxSamplesPerBin,
                     " sampling points per bin; give a sampling_ratio or clip the boxes to the image");
    return g;
}

// Work items: (box, block of channels), so a few boxes still spread over every thread.
int64_t channel_blocks(int64_t channels) { return (channels + kChannelBlock - 1) / kChannelBlock; }

// Any layout and dtype: the input as contiguous NCHW T, torchvision's loop order per channel.
template <typename T>
at::Tensor roi_align_generic(const at::Tensor &input, const at::Tensor &rois_t, double spatial_scale,
                             int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio, bool aligned) {
    const at::Tensor src_t = input.to(c10::CppTypeToScalarType<T>::value).contiguous();
    const int64_t rois = rois_t.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
    at::Tensor out = at::empty({rois, channels, pooled_h, pooled_w}, src_t.options());
    const T *src = src_t.data_ptr<T>(), *roi_data = rois_t.data_ptr<T>();
    T *dst = out.data_ptr<T>();
    const int64_t bins = pooled_h * pooled_w, blocks = channel_blocks(channels);
    at::parallel_for(0, rois * blocks, 1, [&](int64_t begin, int64_t end) {
        std::vector<Sample<T>> samples;
        for (int64_t item = begin; item < end; ++item) {
            const int64_t k = item / blocks, c0 = item % blocks * kChannelBlock;
            const T *roi = roi_data + k * 5;
            const BoxGrid<T> g = grid_of(roi, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned, k);
            box_samples(g, height, width, pooled_h, pooled_w, &samples);
            const int64_t per_bin = bins > 0 ? static_cast<int64_t>(samples.size()) / bins : 0;
            const int64_t image = static_cast<int64_t>(roi[0]);
            for (int64_t c = c0; c < std::min(channels, c0 + kChannelBlock); ++c) {
                const T *plane = src + (image * channels + c) * height * width;
                T *o = dst + (k * channels + c) * bins;
                const Sample<T> *s = samples.data();
                for (int64_t bin = 0; bin < bins; ++bin) {
                    T value = 0;
                    for (int64_t j = 0; j < per_bin; ++j, ++s)
                        value += s->w[0] * plane[s->pos[0]] + s->w[1] * plane[s->pos[1]] + s->w[2] * plane[s->pos[2]] +
                                 s->w[3] * plane[s->pos[3]];
                    o[bin] = value / g.count;
                }
            }
        }
    });
    return out.to(input.scalar_type());
}

// fp32 or bf16 channels-last input, read in place.
at::Tensor roi_align_channels_last(const at::Tensor &input, const at::Tensor &rois_t, double spatial_scale,
                                   int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio, bool aligned,
                                   bool keep_layout) {
    const bool bf16 = input.scalar_type() == at::kBFloat16;
    const int64_t rois = rois_t.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
    const auto format = keep_layout ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    at::Tensor out = at::empty({rois, channels, pooled_h, pooled_w}, input.options().memory_format(format));
    const int64_t bins = pooled_h * pooled_w, blocks = channel_blocks(channels);
    const int64_t element = input.element_size();
    const auto *src = static_cast<const char *>(input.data_ptr());
    auto *dst = static_cast<char *>(out.data_ptr());
    const float *roi_data = rois_t.data_ptr<float>();
    const ChannelsLastKernel kernel = choose_channels_last(bf16);
    at::parallel_for(0, rois * blocks, 1, [&](int64_t begin, int64_t end) {
        std::vector<Sample<float>> samples;
        for (int64_t item = begin; item < end; ++item) {
            const int64_t k = item / blocks, c0 = item % blocks * kChannelBlock;
            const float *roi = roi_data + k * 5;
            const BoxGrid<float> g = grid_of(roi, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned, k);
            box_samples(g, height, width, pooled_h, pooled_w, &samples);
            ChannelsLastProblem p;
            p.bf16 = bf16;
            p.src = src + static_cast<int64_t>(roi[0]) * height * width * channels * element;
            p.channels = channels;
            p.samples = samples.data();
            p.bins = bins;
            p.samples_per_bin = static_cast<int64_t>(samples.size()) / bins;
            p.count = g.count;
            p.c_begin = c0;
            p.c_end = std::min(channels, c0 + kChannelBlock);
            p.dst = dst + k * channels * bins * element;
            p.dst_bin_stride = keep_layout ? channels : 1;
            p.dst_channel_stride = keep_layout ? 1 : bins;
            kernel(p);
        }
    });
    return out;
}

}  // namespace

at::Tensor roi_align(const at::Tensor &input, const at::Tensor &rois, double spatial_scale, int64_t pooled_h,
                     int64_t pooled_w, int64_t sampling_ratio, bool aligned, bool keep_layout) {
    check_roi_args(kOp, input, rois, spatial_scale, pooled_h, pooled_w);
    IPEX_CHECK_INPUT(sampling_ratio >= 0, kOp, ": sampling_ratio must be 0 (adaptive) or positive, got ",
                     sampling_ratio);
    IPEX_CHECK_INPUT(sampling_ratio <= kMaxSamplesPerBin / std::max<int64_t>(sampling_ratio, 1), kOp,
                     ": sampling_ratio ", sampling_ratio, " asks for more than ", kMaxSamplesPerBin,
                     " sampling points per bin");
    const int64_t rois_n = rois.size(0), channels = input.size(1);
    if (rois_n * channels * pooled_h * pooled_w == 0 || input.size(2) == 0 || input.size(3) == 0) {
        const auto format = keep_layout ? input.suggest_memory_format() : at::MemoryFormat::Contiguous;
        return at::zeros({rois_n, channels, pooled_h, pooled_w}, input.options().memory_format(format));
    }
    const at::ScalarType dtype = input.scalar_type();
    if (dtype == at::kDouble)
        return roi_align_generic<double>(input, checked_rois<double>(kOp, rois, input.size(0)), spatial_scale,
                                         pooled_h, pooled_w, sampling_ratio, aligned);
    const at::Tensor rois_t = checked_rois<float>(kOp, rois, input.size(0));
    const bool channels_last = input.suggest_memory_format() == at::MemoryFormat::ChannelsLast &&
                               input.is_contiguous(at::MemoryFormat::ChannelsLast);
    if ((dtype == at::kFloat || dtype == at::kBFloat16) && channels_last)
        return roi_align_channels_last(input, rois_t, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned,
                                       keep_layout);
    return roi_align_generic<float>(input, rois_t, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned);
}

}  // namespace ipex::ops::detection
