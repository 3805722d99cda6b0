// One block of keys of a row's online softmax, the running-max form both blocked attentions
// use (the graph op's, ops/attention_kernel_avx512.cpp, and the LLM's over its KV cache,
// llm/attention_avx512.cpp): scores arrive a block of keys at a time, and what the row has
// accumulated so far is rescaled whenever a later block raises its maximum. Same rules as
// math.h: include only from files built with AVX-512 flags; static, one copy per file.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/avx512/math.h"

namespace ipex::kernels::avx512 {

// The lanes of the 16 starting at `first` whose index lies in [lo, hi).
static inline __mmask16 lanes_within(int64_t first, int64_t lo, int64_t hi) {
    const auto below = [](int64_t n) { return n <= 0 ? __mmask16(0) : tail_mask(n); };
    return static_cast<__mmask16>(below(hi - first) & ~below(lo - first));
}

// x[0, n): the block's final scores (scaled, masked, bias added; -inf where hidden), whose
// maximum is block_max. Folds the block into the row's running max *m and sum *sum, rescales
// the row's output accumulator acc[0, width) from the old max to the new one, and hands the
// block's weights exp(x - max) to store(j, lanes) for j = 0, 16, ... below `padded`
// (>= n; lanes past n are 0), which writes them where the P·V product reads them (x itself
// may be that place). While every score of the row so far is -inf nothing is folded in: the
// weights are all 0. exp16 makes exp(-inf) exactly 0.
template <typename Store>
static inline void online_softmax_block(const float *x, int64_t n, float block_max, float *m, float *sum,
                                        float *acc, int64_t width, int64_t padded, Store store) {
    const float new_max = *m < block_max ? block_max : *m;
    if (new_max == -__builtin_inff()) {
        for (int64_t j = 0; j < padded; j += kLanes) store(j, _mm512_setzero_ps());
        return;
    }
    const float correction = exp16(_mm512_set1_ps(*m - new_max))[0];  // 0 from *m = -inf
    const __m512 shift = _mm512_set1_ps(new_max);
    __m512 vsum = _mm512_setzero_ps();
    for (int64_t j = 0; j < padded; j += kLanes) {
        const __mmask16 lanes = j < n ? tail_mask(n - j) : __mmask16(0);
        const __m512 e = _mm512_maskz_mov_ps(lanes, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, x + j), shift)));
        vsum = _mm512_add_ps(vsum, e);
        store(j, e);
    }
    *sum = *sum * correction + _mm512_reduce_add_ps(vsum);
    *m = new_max;
    if (correction != 1.f) {
        const __m512 c = _mm512_set1_ps(correction);
        int64_t d = 0;
        // Whole vectors take plain stores: a masked one costs several times more on Zen 4/5.
        for (; d + kLanes <= width; d += kLanes) _mm512_storeu_ps(acc + d, _mm512_mul_ps(_mm512_loadu_ps(acc + d), c));
        if (d < width) {
            const __mmask16 lanes = tail_mask(width - d);
            _mm512_mask_storeu_ps(acc + d, lanes, _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, acc + d), c));
        }
    }
}

}  // namespace ipex::kernels::avx512
