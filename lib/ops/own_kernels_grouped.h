// The block walk both builds of the own grouped convolution kernel share (own_kernels.h,
// run_grouped; own_kernels_grouped_avx512.cpp, own_kernels_grouped_avx2.cpp): the output's
// pixels in blocks of kPixels consecutive ones (across rows and images, so small images fill
// blocks too), parallel over blocks, and for each block a table of each pixel's input pixel per
// tap (a row of zeros for a tap in the padding), so strides and dilation change only the table;
// and the tile walk the AVX2 build takes for large weights over few pixels (grouped_walks_tiles).
// Everything here has internal linkage: each build compiles its own copy with its own machine
// flags, and no copy made with AVX-512 flags can stand in for another file's.
#pragma once

#include <ATen/Parallel.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/own_kernels.h"

namespace ipex::ops::own_kernels {
namespace {  // NOLINT(build/namespaces): see the file comment

// Where a block's taps read: taps[t][j] is pixel j's input pixel under tap t (channel 0), or
// a row of zeros where the tap falls in the padding.
template <class T, int kPixels>
struct GroupedWindow {
    const T *taps[kGroupedMaxTaps][kPixels];
};

// Each tap's input pixel relative to the tap (0, 0) one, when all of them are inside the image.
inline void fill_tap_offsets(const Grouped &p, int64_t *offset) {
    const int64_t c_in = p.groups * p.in_per_group;
    for (int64_t t = 0; t < p.kh * p.kw; ++t)
        offset[t] = (t / p.kw * p.dilation_h * p.iw + t % p.kw * p.dilation_w) * c_in;
}

// Fills `win` with the taps of block u (pixels u * kPixels on) and returns its pixel count.
template <class T, int kPixels>
int fill_grouped_window(const Grouped &p, const T *src, const T *zeros, const int64_t *offset, int64_t u,
                        GroupedWindow<T, kPixels> *win) {
    const int64_t c_in = p.groups * p.in_per_group, taps = p.kh * p.kw, pixels = p.n * p.oh * p.ow;
    const int64_t q0 = u * kPixels;
    const int count = static_cast<int>(pixels - q0 < kPixels ? pixels - q0 : kPixels);
    int64_t ox = q0 % p.ow, oy = q0 / p.ow % p.oh, img = q0 / (p.ow * p.oh);
    for (int j = 0; j < count; ++j) {
        const int64_t iy0 = oy * p.stride_h - p.pad_h, ix0 = ox * p.stride_w - p.pad_w;
        const bool inside = iy0 >= 0 && ix0 >= 0 && iy0 + (p.kh - 1) * p.dilation_h < p.ih &&
                            ix0 + (p.kw - 1) * p.dilation_w < p.iw;
        if (inside) {
            const T *base = src + ((img * p.ih + iy0) * p.iw + ix0) * c_in;
            for (int64_t t = 0; t < taps; ++t) win->taps[t][j] = base + offset[t];
        } else {
            for (int64_t t = 0; t < taps; ++t) {
                const int64_t iy = iy0 + t / p.kw * p.dilation_h, ix = ix0 + t % p.kw * p.dilation_w;
                const bool in_image = iy >= 0 && iy < p.ih && ix >= 0 && ix < p.iw;
                win->taps[t][j] = in_image ? src + ((img * p.ih + iy) * p.iw + ix) * c_in : zeros;
            }
        }
        if (++ox == p.ow) {
            ox = 0;
            if (++oy == p.oh) oy = 0, ++img;
        }
    }
    return count;
}

// Calls block(count, window, out) for every block of `count` <= kPixels output pixels, `out`
// the dst element of the block's first pixel's channel 0; parallel over blocks, each thread
// given about 256k products. While a block computes, the next one's input pixels are
// prefetched: a block reads a 64-byte line per group from each of its pixels' taps, scattered
// over kh input rows (over 2 x kw columns at stride 2), which the hardware prefetchers do not
// follow (an AVX2 EPYC, fp32 3x3 with 20 groups of 16, 8x320x28x28 at stride 2: 2.6-3.7 ms
// without, 1.9-2.6 with; no change where the input stays in the caches).
template <class T, int kPixels, class Block>
void for_each_grouped_block(const Grouped &p, const Block &block) {
    const int64_t c_in = p.groups * p.in_per_group, c_out = p.groups * p.out_per_group;
    const int64_t pixels = p.n * p.oh * p.ow, blocks = (pixels + kPixels - 1) / kPixels;
    const int64_t taps = p.kh * p.kw;
    int64_t offset[kGroupedMaxTaps];
    fill_tap_offsets(p, offset);
    const auto *src = static_cast<const T *>(p.src);
    const std::unique_ptr<T[]> zeros(new T[c_in]());  // what a tap in the padding reads
    const int64_t per_block = kPixels * c_out * p.in_per_group * taps;
    const int64_t grain = per_block >= (1 << 18) ? 1 : (1 << 18) / (per_block > 0 ? per_block : 1);
    const int64_t lines = (c_in * static_cast<int64_t>(sizeof(T)) + 63) / 64;  // of an input pixel
    at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
        GroupedWindow<T, kPixels> win[2];
        int count[2] = {0, 0};
        count[begin & 1] = fill_grouped_window<T, kPixels>(p, src, zeros.get(), offset, begin, &win[begin & 1]);
        for (int64_t u = begin; u < end; ++u) {
            const int now = static_cast<int>(u & 1), next = now ^ 1;
            if (u + 1 < end) {
                count[next] = fill_grouped_window<T, kPixels>(p, src, zeros.get(), offset, u + 1, &win[next]);
                for (int64_t t = 0; t < taps; ++t)
                    for (int j = 0; j < count[next]; ++j) {
                        const char *line = reinterpret_cast<const char *>(win[next].taps[t][j]);
                        for (int64_t l = 0; l < lines; ++l) __builtin_prefetch(line + 64 * l);
                    }
            }
            block(count[now], win[now], u * kPixels * c_out);
        }
    });
}

// The walk grouped_walks_tiles chooses (own_kernels.h): parallel over the output tiles (16
// outputs of a group; tile k is group k / tiles-per-group's tile k % tiles-per-group), and for
// each of a thread's tiles every block in turn, so that a tile's weights come from memory once
// and then from L2. Calls block(count, window, out, k, k + 1) for each block and tile k; every
// block's tap table is built once, before the threads start.
template <class T, int kPixels, class Block>
void for_each_grouped_tile(const Grouped &p, const Block &block) {
    const int64_t c_in = p.groups * p.in_per_group, c_out = p.groups * p.out_per_group;
    const int64_t blocks = (p.n * p.oh * p.ow + kPixels - 1) / kPixels;
    int64_t offset[kGroupedMaxTaps];
    fill_tap_offsets(p, offset);
    const std::unique_ptr<T[]> zeros(new T[c_in]());
    std::vector<GroupedWindow<T, kPixels>> windows(static_cast<size_t>(blocks));
    std::vector<int> counts(static_cast<size_t>(blocks));
    for (int64_t u = 0; u < blocks; ++u)
        counts[u] = fill_grouped_window<T, kPixels>(p, static_cast<const T *>(p.src), zeros.get(), offset, u,
                                                    &windows[u]);
    at::parallel_for(0, p.groups * (p.out_per_group / 16), 1, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k)
            for (int64_t u = 0; u < blocks; ++u) block(counts[u], windows[u], u * kPixels * c_out, k, k + 1);
    });
}

}  // namespace
}  // namespace ipex::ops::own_kernels
