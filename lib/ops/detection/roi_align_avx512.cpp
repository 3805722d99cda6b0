// The channels-last RoIAlign kernel (roi_align_kernel.h) on 16-lane registers: the portable
// loop's arithmetic, lane by lane, in the same order and without fused multiply-adds, so it
// gives the portable build's results to the bit. Built with AVX-512 and AVX512-BF16 flags;
// runs only after avx512::available().
#include <immintrin.h>

#include "kernels/avx512/math.h"
#include "ops/detection/roi_align_kernel.h"

namespace ipex::ops::detection::avx512 {
namespace {

using ::ipex::kernels::avx512::tail_mask;
constexpr int64_t kLanes = 16;
constexpr int kRegisters = kChannelBlock / kLanes;

__m512 load(const void *src, bool bf16, int64_t i, __mmask16 m) {
    if (bf16) return ::ipex::kernels::avx512::load_bf16(static_cast<const uint16_t *>(src) + i, m);
    return _mm512_maskz_loadu_ps(m, static_cast<const float *>(src) + i);
}

void store(const ChannelsLastProblem &p, int64_t out, int64_t c, __mmask16 m, __m512 v) {
    if (p.dst_channel_stride == 1) {
        if (p.bf16) {
            ::ipex::kernels::avx512::store_bf16(static_cast<uint16_t *>(p.dst) + out + c, m, v);
        } else {
            _mm512_mask_storeu_ps(static_cast<float *>(p.dst) + out + c, m, v);
        }
        return;
    }
    alignas(64) float lanes[kLanes];
    alignas(32) uint16_t rounded[kLanes];
    _mm512_store_ps(lanes, v);
    if (p.bf16) _mm256_store_si256(reinterpret_cast<__m256i *>(rounded), ::ipex::kernels::avx512::fp32_to_bf16(v));
    const int n = __builtin_popcount(m);
    for (int j = 0; j < n; ++j) {
        const int64_t at = out + (c + j) * p.dst_channel_stride;
        if (p.bf16) {
            static_cast<uint16_t *>(p.dst)[at] = rounded[j];
        } else {
            static_cast<float *>(p.dst)[at] = lanes[j];
        }
    }
}

}  // namespace

void run_channels_last(const ChannelsLastProblem &p) {
    const __m512 count = _mm512_set1_ps(p.count);
    for (int64_t c0 = p.c_begin; c0 < p.c_end; c0 += kChannelBlock) {
        const int64_t nc = p.c_end - c0 < kChannelBlock ? p.c_end - c0 : kChannelBlock;
        __mmask16 mask[kRegisters];
        for (int r = 0; r < kRegisters; ++r) mask[r] = nc > r * kLanes ? tail_mask(nc - r * kLanes) : 0;
        for (int64_t bin = 0; bin < p.bins; ++bin) {
            __m512 acc[kRegisters];
            for (int r = 0; r < kRegisters; ++r) acc[r] = _mm512_setzero_ps();
            const Sample<float> *s = p.samples + bin * p.samples_per_bin;
            for (int64_t k = 0; k < p.samples_per_bin; ++k, ++s) {
                const __m512 w0 = _mm512_set1_ps(s->w[0]), w1 = _mm512_set1_ps(s->w[1]);
                const __m512 w2 = _mm512_set1_ps(s->w[2]), w3 = _mm512_set1_ps(s->w[3]);
                const int64_t o0 = s->pos[0] * p.channels + c0, o1 = s->pos[1] * p.channels + c0;
                const int64_t o2 = s->pos[2] * p.channels + c0, o3 = s->pos[3] * p.channels + c0;
                for (int r = 0; r < kRegisters; ++r) {
                    if (!mask[r]) break;
                    const int64_t c = r * kLanes;
                    __m512 t = _mm512_mul_ps(w0, load(p.src, p.bf16, o0 + c, mask[r]));
                    t = _mm512_add_ps(t, _mm512_mul_ps(w1, load(p.src, p.bf16, o1 + c, mask[r])));
                    t = _mm512_add_ps(t, _mm512_mul_ps(w2, load(p.src, p.bf16, o2 + c, mask[r])));
                    t = _mm512_add_ps(t, _mm512_mul_ps(w3, load(p.src, p.bf16, o3 + c, mask[r])));
                    acc[r] = _mm512_add_ps(acc[r], t);
                }
            }
            const int64_t out = bin * p.dst_bin_stride + c0 * p.dst_channel_stride;
            for (int r = 0; r < kRegisters; ++r)
                if (mask[r]) store(p, out, r * kLanes, mask[r], _mm512_div_ps(acc[r], count));
        }
    }
}

}  // namespace ipex::ops::detection::avx512
