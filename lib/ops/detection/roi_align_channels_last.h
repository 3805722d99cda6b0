// The channels-last RoIAlign loop of roi_align_kernel.h, included by the portable build
// (roi_align_kernel.cpp) and the AVX2 one (roi_align_avx2.cpp), which the compiler vectorizes
// over channels. Internal to each including file, which keeps its own copy with its own flags
// (and no std:: template, whose one kept copy could be the AVX2 one). No multiply-add is
// contracted in either (-ffp-contract=off): both round as torchvision does.
#pragma once

#include <cstring>

#include "ops/detection/roi_align_kernel.h"

namespace ipex::ops::detection {
namespace {

inline float widen(const float *src, int64_t i) { return src[i]; }
inline float widen(const uint16_t *src, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// f rounded to bf16, nearest even (kernels/bf16.h's rounding; a NaN stays a quiet NaN).
inline uint16_t narrow(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

template <typename Src>
void channels_last_block(const ChannelsLastProblem &p, const Src *src, int64_t c0, int64_t nc) {
    float acc[kChannelBlock];
    for (int64_t bin = 0; bin < p.bins; ++bin) {
        for (int64_t c = 0; c < nc; ++c) acc[c] = 0.f;
        const Sample<float> *s = p.samples + bin * p.samples_per_bin;
        for (int64_t k = 0; k < p.samples_per_bin; ++k, ++s) {
            const Src *v0 = src + s->pos[0] * p.channels + c0, *v1 = src + s->pos[1] * p.channels + c0;
            const Src *v2 = src + s->pos[2] * p.channels + c0, *v3 = src + s->pos[3] * p.channels + c0;
            const float w0 = s->w[0], w1 = s->w[1], w2 = s->w[2], w3 = s->w[3];
            for (int64_t c = 0; c < nc; ++c)
                acc[c] += w0 * widen(v0, c) + w1 * widen(v1, c) + w2 * widen(v2, c) + w3 * widen(v3, c);
        }
        const int64_t out = bin * p.dst_bin_stride + c0 * p.dst_channel_stride;
        if (p.bf16) {
            auto *dst = static_cast<uint16_t *>(p.dst) + out;
            for (int64_t c = 0; c < nc; ++c) dst[c * p.dst_channel_stride] = narrow(acc[c] / p.count);
        } else {
            auto *dst = static_cast<float *>(p.dst) + out;
            for (int64_t c = 0; c < nc; ++c) dst[c * p.dst_channel_stride] = acc[c] / p.count;
        }
    }
}

// Blocks of kChannelBlock channels over [c_begin, c_end).
void channels_last(const ChannelsLastProblem &p) {
    for (int64_t c0 = p.c_begin; c0 < p.c_end; c0 += kChannelBlock) {
        const int64_t nc = p.c_end - c0 < kChannelBlock ? p.c_end - c0 : kChannelBlock;
        if (p.bf16) {
            channels_last_block(p, static_cast<const uint16_t *>(p.src), c0, nc);
        } else {
            channels_last_block(p, static_cast<const float *>(p.src), c0, nc);
        }
    }
}

}  // namespace
}  // namespace ipex::ops::detection
