// RoIAlign's arithmetic, torch-free: the sampling points of one box and the channels-last
// kernel (portable, AVX2 and AVX-512 builds of one algorithm). torchvision's definition, per box
// (x1, y1, x2, y2 scaled by spatial_scale, less 0.5 when aligned; a box under 1 x 1 widened to
// 1 x 1 when not aligned): a pooled_h x pooled_w grid of bins, each the mean of grid_h x grid_w
// bilinear samples at the centres of its sub-cells (grid = sampling_ratio, or
// ceil(box size / pooled size) when it is 0); a sample more than one pixel outside the map is
// zero, one within a pixel of an edge reads the edge. Every step is done in the order and
// precision torchvision's CPU kernel does it (T = float for fp32 and bf16 data, double for fp64),
// so fp32 results agree with it to the last bit where no fused multiply-add is involved.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ipex::ops::detection {

// One bilinear sample: four offsets (in pixels: y * width + x) and their weights.
template <typename T>
struct Sample {
    int64_t pos[4] = {0, 0, 0, 0};
    T w[4] = {0, 0, 0, 0};
};

// The geometry of one box on one feature map.
template <typename T>
struct BoxGrid {
    T start_h = 0, start_w = 0, bin_h = 0, bin_w = 0;
    int64_t grid_h = 0, grid_w = 0;
    T count = 1;  // grid_h * grid_w, at least 1 (an empty grid gives zeros)
};

// Largest sampling grid per bin (grid_h * grid_w) a box may ask for: an adaptive grid
// (sampling_ratio 0) over a box hundreds of feature-map pixels a side, which no clipped
// detection box is. The op refuses more instead of allocating without bound.
constexpr int64_t kMaxSamplesPerBin = int64_t{1} << 16;

// The grid of box (x1, y1, x2, y2), or false when it exceeds kMaxSamplesPerBin samples per bin.
template <typename T>
bool box_grid(const T *box, T spatial_scale, int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio,
              bool aligned, BoxGrid<T> *g) {
    const T offset = aligned ? T(0.5) : T(0);
    g->start_w = box[0] * spatial_scale - offset;
    g->start_h = box[1] * spatial_scale - offset;
    const T end_w = box[2] * spatial_scale - offset;
    const T end_h = box[3] * spatial_scale - offset;
    T width = end_w - g->start_w, height = end_h - g->start_h;
    if (!aligned) {
        width = width < T(1) ? T(1) : width;
        height = height < T(1) ? T(1) : height;
    }
    g->bin_h = height / static_cast<T>(pooled_h);
    g->bin_w = width / static_cast<T>(pooled_w);
    if (sampling_ratio > 0) {
        if (sampling_ratio > kMaxSamplesPerBin / sampling_ratio) return false;
        g->grid_h = g->grid_w = sampling_ratio;
    } else {
        const double gh = std::ceil(height / pooled_h), gw = std::ceil(width / pooled_w);
        const double limit = static_cast<double>(kMaxSamplesPerBin);
        // A negative size (x2 < x1 with aligned) gives an empty grid, as the int cast does there.
        if (!(std::abs(gh) <= limit && std::abs(gw) <= limit && std::max(gh, 0.0) * std::max(gw, 0.0) <= limit))
            return false;
        g->grid_h = static_cast<int64_t>(gh);
        g->grid_w = static_cast<int64_t>(gw);
    }
    const int64_t n = g->grid_h * g->grid_w;
    g->count = static_cast<T>(n > 1 ? n : 1);
    return true;
}

// The samples of every bin, bin-major (ph, pw), then iy, ix: pooled_h * pooled_w * grid_h *
// grid_w entries.
template <typename T>
void box_samples(const BoxGrid<T> &g, int64_t height, int64_t width, int64_t pooled_h, int64_t pooled_w,
                 std::vector<Sample<T>> *out) {
    const int64_t gh = g.grid_h > 0 ? g.grid_h : 0, gw = g.grid_w > 0 ? g.grid_w : 0;
    out->assign(static_cast<size_t>(pooled_h * pooled_w * gh * gw), Sample<T>{});
    Sample<T> *s = out->data();
    for (int64_t ph = 0; ph < pooled_h; ++ph) {
        for (int64_t pw = 0; pw < pooled_w; ++pw) {
            for (int64_t iy = 0; iy < gh; ++iy) {
                const T yy = g.start_h + ph * g.bin_h + static_cast<T>(iy + .5f) * g.bin_h / static_cast<T>(gh);
                for (int64_t ix = 0; ix < gw; ++ix, ++s) {
                    const T xx = g.start_w + pw * g.bin_w + static_cast<T>(ix + .5f) * g.bin_w / static_cast<T>(gw);
                    T y = yy, x = xx;
                    // Outside (NaN included): zero weights.
                    if (!(y >= -1.0 && y <= height && x >= -1.0 && x <= width)) continue;
                    if (y <= 0) y = 0;
                    if (x <= 0) x = 0;
                    int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
                    if (y_low >= height - 1) {
                        y_high = y_low = height - 1;
                        y = static_cast<T>(y_low);
                    } else {
                        y_high = y_low + 1;
                    }
                    if (x_low >= width - 1) {
                        x_high = x_low = width - 1;
                        x = static_cast<T>(x_low);
                    } else {
                        x_high = x_low + 1;
                    }
                    const T ly = y - y_low, lx = x - x_low;
                    const T hy = 1. - ly, hx = 1. - lx;
                    s->pos[0] = y_low * width + x_low;
                    s->pos[1] = y_low * width + x_high;
                    s->pos[2] = y_high * width + x_low;
                    s->pos[3] = y_high * width + x_high;
                    s->w[0] = hy * hx;
                    s->w[1] = hy * lx;
                    s->w[2] = ly * hx;
                    s->w[3] = ly * lx;
                }
            }
        }
    }
}

// One call of the channels-last kernel: the boxes' bins over a block of channels.
struct ChannelsLastProblem {
    bool bf16 = false;          // src and dst bf16 (bits), else fp32
    const void *src = nullptr;  // one image: height x width x channels, dense
    int64_t channels = 0;
    const Sample<float> *samples = nullptr;  // box_samples of one box
    int64_t bins = 0, samples_per_bin = 0;
    float count = 1;
    int64_t c_begin = 0, c_end = 0;  // the channels computed
    // dst + bin * dst_bin_stride + c * dst_channel_stride (elements): channels-last output has
    // a channel stride of 1, the NCHW output torchvision returns a bin stride of 1.
    void *dst = nullptr;
    int64_t dst_bin_stride = 0, dst_channel_stride = 1;
};

// The channels per step of the channels-last kernels (four AVX-512 registers of fp32).
constexpr int64_t kChannelBlock = 64;

// Each bin: sum over its samples of w0 v0 + w1 v1 + w2 v2 + w3 v3 (that order, no fused
// multiply-add), divided by count; bf16 data widened exactly and the mean rounded once.
void run_channels_last(const ChannelsLastProblem &p);
namespace avx2 {
void run_channels_last(const ChannelsLastProblem &p);  // AVX2 + FMA build of the same code
}
namespace avx512 {
bool available(bool bf16);  // AVX-512 (and AVX512-BF16 for bf16 data)
void run_channels_last(const ChannelsLastProblem &p);
}  // namespace avx512

}  // namespace ipex::ops::detection
