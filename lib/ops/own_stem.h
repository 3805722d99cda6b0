// The own bf16 kernel of convolutions on few input channels (a network's stem: an image's 3
// channels, 3x3 stride 2 in MobileNet, EfficientNet, RegNet, ShuffleNet and SqueezeNet, 7x7 in
// ResNet and DenseNet, 4x4 stride 4 in ConvNeXt). oneDNN 2.6 runs the 3x3 ones at 25-50% of the
// bf16 peak, from a channels-last bf16 copy of the batch that a pass of its own made first from
// the network's fp32 planes: the batch crossed memory three times before the first multiply.
// Here each thread converts the input rows its output rows read into a ring of padded rows as it
// goes (fp32 planes read once, no converted copy of the batch). A kernel row's taps are kw x
// channels consecutive values of a ring row: their pairs are read in place, and where the count
// is odd (3x3 or 7x7 on 3 channels) each row's last value (its tail) is copied out and the tails
// of two rows make one pair, so a 3x3 kernel on 3 channels takes 3 x 4 + 2 = 14 VDPBF16PS pairs
// (13.5 would hold its 27 taps) and a 7x7 one 7 x 10 + 4 = 74. No product meets a value that is
// neither a tap nor a zero the kernel wrote (the padding, the pair after an odd row's tail). Sums in
// fp32 from the bias, the post-ops on them, rounded to bf16 once: oneDNN's bf16 convolution's
// arithmetic up to the order of the additions. ConvolutionContext times it against oneDNN per
// input shape (the conversion counted on oneDNN's side, as run() makes it).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "ops/own_kernels.h"

namespace ipex::ops::own_stem {

constexpr int64_t kMaxChannels = 4;
constexpr int64_t kTileChannels = 64;

// A stem convolution's geometry, from its weight's sizes [O, C, kh, kw], 2-D stride and
// padding (this kernel's and the int8 one's, ops/int8/int8_stem.h).
struct Geometry {
    int64_t channels = 0, out_channels = 0, kh = 0, kw = 0;
    int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
    void set(at::IntArrayRef weight_sizes, at::IntArrayRef stride, at::IntArrayRef padding);
    int64_t tiles() const { return (out_channels + kTileChannels - 1) / kTileChannels; }
};

// The weight packed as both stem kernels read it: for each tile of kTileChannels output
// channels (tile_values elements apart), group g (< groups), 16-channel block of the tile,
// lane and element e of a group (per_group of them: bf16 pairs, VNNI's 4 bytes), the weight
// tap_of(g, e) = {kernel row, value of that row (pixel v / channels, channel v % channels)}
// names; a row of -1 leaves a zero. weight: [out_channels, channels, kh, kw] dense; out zeroed.
template <class T, class TapOf>
void pack_tiles(const Geometry &p, int64_t groups, int64_t per_group, int64_t tile_values, const TapOf &tap_of,
                const T *weight, T *out) {
    for (int64_t t = 0; t < p.tiles(); ++t) {
        const int64_t first = t * kTileChannels;
        const int64_t blocks = (std::min(kTileChannels, p.out_channels - first) + 15) / 16;
        T *tile = out + t * tile_values;
        for (int64_t g = 0; g < groups; ++g)
            for (int64_t b = 0; b < blocks; ++b)
                for (int64_t lane = 0; lane < 16 && first + 16 * b + lane < p.out_channels; ++lane) {
                    const int64_t oc = first + 16 * b + lane;
                    for (int64_t e = 0; e < per_group; ++e) {
                        const auto [r, v] = tap_of(g, e);
                        if (r < 0) continue;
                        const int64_t kx = v / p.channels, c = v % p.channels;
                        tile[((g * blocks + b) * 16 + lane) * per_group + e] =
                            weight[((oc * p.channels + c) * p.kh + r) * p.kw + kx];
                    }
                }
    }
}

// Output pixels a tile of NR 16-channel blocks takes in both stem kernels: MR x NR sums, NR
// weight vectors and a broadcast in the 32 registers (fewer blocks: more pixels share each
// weight load).
constexpr int kMaxMr[4] = {12, 12, 8, 6};
constexpr int kMr = 12;

// A stem kernel's tile functions: table()[nr - 1][mr - 1] is Kernel<MR, nr>::run with MR = mr
// up to the most nr blocks take (kMaxMr). Each kernel file instantiates it with its own Tile.
template <class Tile, template <int, int> class Kernel>
struct TileTable {
    using Fn = void (*)(const Tile &);
    template <int NR, size_t... M>
    static constexpr std::array<Fn, kMr> row(std::index_sequence<M...>) {
        return {&Kernel<std::min(static_cast<int>(M) + 1, kMaxMr[NR - 1]), NR>::run...};
    }
    static constexpr std::array<std::array<Fn, kMr>, 4> table() {
        return {row<1>(std::make_index_sequence<kMr>()), row<2>(std::make_index_sequence<kMr>()),
                row<3>(std::make_index_sequence<kMr>()), row<4>(std::make_index_sequence<kMr>())};
    }
};

// The geometry and packed numbers of one convolution, fixed when its context is made.
struct Plan : Geometry {
    // A kernel row's values (kw pixels of `channels`), the pairs read in place, and the pairs the
    // rows' tails make (rows 2g and 2g + 1, a zero after the last row where kh is odd).
    int64_t row_values() const { return kw * channels; }
    int64_t row_pairs() const { return row_values() / 2; }
    int64_t tail_groups() const { return row_values() % 2 != 0 ? (kh + 1) / 2 : 0; }
    int64_t pairs() const { return kh * row_pairs() + tail_groups(); }
    // bf16 weights (as int16): for each tile of 64 output channels, [pairs()][blocks][16 lanes]
    // [2], blocks its 16-channel blocks (4, fewer in the last tile), tile_values() apart: first
    // [kh][row_pairs()], pair q of a row holding its values 2q and 2q + 1 (value v: pixel v /
    // channels, channel v % channels), then the tail groups; zeros past out_channels.
    at::Tensor packed;
    int64_t tile_values() const { return pairs() * 4 * 32; }
    std::vector<float> bias;          // per output channel, zeros up to a multiple of 64
    own_kernels::Problem activation;  // its post_ops / num_post_ops only
};

// Whether the kernel computes a convolution of these parameters: 2-D, one group, 1-4 input
// channels, no dilation, kernels of 2 taps up to 16x16 (a 1x1 one is the pointwise kernel's).
bool fits(int64_t channels, int64_t kh, int64_t kw, int64_t groups, at::IntArrayRef dilation);

// Whether this CPU runs it (AVX512-BF16).
bool available();

// weight: [out_channels, channels, kh, kw] of any floating dtype (its bf16 values are used);
// bias: fp32 per output channel, or undefined; post-ops in `activation` (own_kernels.h).
Plan make_plan(const at::Tensor &weight, const at::Tensor &bias, at::IntArrayRef stride, at::IntArrayRef padding,
               const own_kernels::Problem &activation);

// The input: fp32 planes (n x channels x h x w, dense NCHW) or channels-last bf16 (n x h x w x
// channels, dense); one of them.
struct Source {
    const float *planes = nullptr;
    const uint16_t *bf16_last = nullptr;
};

// dst: n x oh x ow x out_channels bf16, dense. Call only when available().
void run(const Plan &plan, const Source &src, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow,
         uint16_t *dst);

}  // namespace ipex::ops::own_stem
