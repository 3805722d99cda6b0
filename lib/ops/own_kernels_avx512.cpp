// The own kernels (own_kernels.h) other than the depthwise convolution: pointwise
// convolution, post-ops, spatial mean, three planes to channels-last, scale-shift, channel
// interleave. Built with AVX-512
// and AVX512-BF16 flags; runs only after own_kernels::available().
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <memory>

#include "ops/own_kernels_avx512.h"

namespace ipex::ops::own_kernels {
namespace {

template <bool kBf16>
void post_ops_in_place(const Problem &p, void *data, int64_t n) {
    constexpr int64_t kGrain = 1 << 14;
    constexpr int kUnroll = 4;
    const __mmask16 all = 0xFFFF;
    at::parallel_for(0, (n + kLanes - 1) / kLanes, kGrain / kLanes, [&](int64_t begin, int64_t end) {
        const int64_t full = lesser(end, n / kLanes);  // vectors without a tail
        int64_t v = begin;
        for (; v + kUnroll <= full; v += kUnroll) {
            __m512 x[kUnroll];
            for (int u = 0; u < kUnroll; ++u) x[u] = load<kBf16>(data, (v + u) * kLanes, all);
            apply_block<kBf16, kUnroll>(p, x);
            for (int u = 0; u < kUnroll; ++u) store<kBf16>(data, (v + u) * kLanes, all, x[u]);
        }
        for (; v < end; ++v) {
            const __mmask16 m = tail_mask(n - v * kLanes);
            store<kBf16>(data, v * kLanes, m, apply<kBf16>(p, load<kBf16>(data, v * kLanes, m)));
        }
    });
}

// The pointwise kernel's tile: kRows pixels from m0 by kVectors output vectors from vector
// v0, kRows * kVectors sums in registers (24 at most, with the weights and a broadcast).
template <bool kBf16, int kRows, int kVectors>
void pointwise_tile(const Pointwise &p, int64_t m0, int64_t v0) {
    const int64_t nv = (p.n + kLanes - 1) / kLanes;
    __m512 acc[kRows][kVectors];
    for (int v = 0; v < kVectors; ++v) {
        const __m512 b = p.bias ? _mm512_loadu_ps(p.bias + (v0 + v) * kLanes) : _mm512_setzero_ps();
        for (int r = 0; r < kRows; ++r) acc[r][v] = b;
    }
    if constexpr (kBf16) {
        const uint16_t *a = static_cast<const uint16_t *>(p.src) + m0 * p.k;
        const uint16_t *weight = static_cast<const uint16_t *>(p.weight);
        const int64_t pairs = p.k / 2;
        for (int64_t kp = 0; kp < pairs; ++kp) {
            const uint16_t *w = weight + (kp * nv + v0) * 2 * kLanes;
            __m512bh wv[kVectors];
            for (int v = 0; v < kVectors; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(w + v * 2 * kLanes);
            for (int r = 0; r < kRows; ++r) {
                int32_t pair;
                __builtin_memcpy(&pair, a + r * p.k + 2 * kp, sizeof pair);
                const __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
                for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, wv[v]);
            }
        }
        if (p.k % 2 != 0) {  // the last input channel, paired with a zero (never read past the row)
            const uint16_t *w = weight + (pairs * nv + v0) * 2 * kLanes;
            __m512bh wv[kVectors];
            for (int v = 0; v < kVectors; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(w + v * 2 * kLanes);
            for (int r = 0; r < kRows; ++r) {
                const __m512bh x = (__m512bh)_mm512_set1_epi32(a[r * p.k + p.k - 1]);
                for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, wv[v]);
            }
        }
    } else {
        const float *a = static_cast<const float *>(p.src) + m0 * p.k;
        const float *weight = static_cast<const float *>(p.weight);
        for (int64_t i = 0; i < p.k; ++i) {
            const float *w = weight + (i * nv + v0) * kLanes;
            __m512 wv[kVectors];
            for (int v = 0; v < kVectors; ++v) wv[v] = _mm512_loadu_ps(w + v * kLanes);
            for (int r = 0; r < kRows; ++r) {
                const __m512 x = _mm512_set1_ps(a[r * p.k + i]);
                for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_fmadd_ps(x, wv[v], acc[r][v]);
            }
        }
    }
    // Row by row, the summand, the post-ops, then the stores: the registers of rows stored are
    // free for the next row's exp (1.03-1.20x in fp32, 1.00-1.07x in bf16 over the whole tile
    // at once). The summand is read where the output goes, just before it is written.
    const __m512 scale = _mm512_set1_ps(p.sum_scale);
    for (int r = 0; r < kRows; ++r) {
        if (p.sum)
            for (int v = 0; v < kVectors; ++v) {
                const int64_t at = (m0 + r) * p.n + (v0 + v) * kLanes;
                acc[r][v] = _mm512_fmadd_ps(load<kBf16>(p.dst, at, tail_mask(p.n - (v0 + v) * kLanes)), scale,
                                            acc[r][v]);
            }
        apply_block<kBf16, kVectors>(p.activation, acc[r]);
        for (int v = 0; v < kVectors; ++v)
            store<kBf16>(p.dst, (m0 + r) * p.n + (v0 + v) * kLanes, tail_mask(p.n - (v0 + v) * kLanes), acc[r][v]);
    }
}

// Every output vector of kRows pixels from m0, four at a time.
template <bool kBf16, int kRows>
void pointwise_rows(const Pointwise &p, int64_t m0) {
    const int64_t nv = (p.n + kLanes - 1) / kLanes;
    int64_t v0 = 0;
    for (; v0 + 4 <= nv; v0 += 4) pointwise_tile<kBf16, kRows, 4>(p, m0, v0);
    switch (nv - v0) {
        case 3: pointwise_tile<kBf16, kRows, 3>(p, m0, v0); break;
        case 2: pointwise_tile<kBf16, kRows, 2>(p, m0, v0); break;
        case 1: pointwise_tile<kBf16, kRows, 1>(p, m0, v0); break;
        default: break;
    }
}

template <bool kBf16>
void pointwise_typed(const Pointwise &p) {
    constexpr int64_t kRows = 6;
    const int64_t blocks = (p.m + kRows - 1) / kRows;
    // A block costs about kRows * k * n multiply-adds; give a thread some 256k of them.
    const int64_t grain = greater(1, 262144 / greater(1, kRows * p.k * p.n));
    at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const int64_t m0 = b * kRows;
            if (m0 + kRows <= p.m) {
                pointwise_rows<kBf16, kRows>(p, m0);
            } else {
                for (int64_t m = m0; m < p.m; ++m) pointwise_rows<kBf16, 1>(p, m);
            }
        }
    });
}

// The sums of kVectors vectors of channels (the last one `tail`-masked) over pixels [q0, q1) of
// rows `stride` apart: four pixels at a time into four sets of sums, so that each add waits
// on the one four pixels back rather than the one before.
template <bool kBf16, int kVectors>
void sum_pixels(const void *src, int64_t at, int64_t stride, int64_t q0, int64_t q1, __mmask16 tail,
                __m512 *total) {
    constexpr int kUnroll = 4;
    __m512 sum[kUnroll][kVectors];
    for (int u = 0; u < kUnroll; ++u)
        for (int v = 0; v < kVectors; ++v) sum[u][v] = _mm512_setzero_ps();
    auto mask = [&](int v) { return v == kVectors - 1 ? tail : __mmask16(0xffff); };
    int64_t q = q0;
    for (; q + kUnroll <= q1; q += kUnroll)
        for (int u = 0; u < kUnroll; ++u)
            for (int v = 0; v < kVectors; ++v)
                sum[u][v] = _mm512_add_ps(sum[u][v], load<kBf16>(src, at + (q + u) * stride + v * kLanes, mask(v)));
    for (; q < q1; ++q)
        for (int v = 0; v < kVectors; ++v)
            sum[0][v] = _mm512_add_ps(sum[0][v], load<kBf16>(src, at + q * stride + v * kLanes, mask(v)));
    for (int v = 0; v < kVectors; ++v)
        total[v] = _mm512_add_ps(total[v], _mm512_add_ps(_mm512_add_ps(sum[0][v], sum[1][v]),
                                                         _mm512_add_ps(sum[2][v], sum[3][v])));
}

// The mean in two steps: one task per (image, chunk of kSpatialMeanChunk pixels) sums the chunk
// for every channel, a block of 4 vectors of channels at a time (the chunk's rows, read from
// memory by the first block, stay in L2 for the others), into the chunk's row of partial sums;
// then each image's chunks are added in order and divided. Against a task per image and channel
// block walking the whole image: 1.4-2.4x (8x144x56x56 bf16 0.183 -> 0.076 ms, 8x1152x7x7 0.025
// -> 0.018 ms).
constexpr int64_t kMeanChunk = kSpatialMeanChunk;

template <bool kBf16>
void spatial_mean_typed(const SpatialMean &p) {
    constexpr int64_t kVectors = 4, kBlock = kVectors * kLanes;
    const int64_t chunks = (p.hw + kMeanChunk - 1) / kMeanChunk, row = (p.c + kLanes - 1) / kLanes * kLanes;
    // every value is written by the first step before the second reads it
    const std::unique_ptr<float[]> partial(new float[p.n * chunks * row]);
    at::parallel_for(0, p.n * chunks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
            const int64_t image = task / chunks, q0 = task % chunks * kMeanChunk, q1 = lesser(p.hw, q0 + kMeanChunk);
            for (int64_t c0 = 0; c0 < p.c; c0 += kBlock) {
                const int64_t vectors = lesser(kVectors, (p.c - c0 + kLanes - 1) / kLanes);
                const __mmask16 tail = tail_mask(p.c - c0 - (vectors - 1) * kLanes);
                __m512 total[kVectors];
                for (int64_t v = 0; v < kVectors; ++v) total[v] = _mm512_setzero_ps();
                const int64_t at = image * p.hw * p.c + c0;
                switch (vectors) {
                    case 1: sum_pixels<kBf16, 1>(p.src, at, p.c, q0, q1, tail, total); break;
                    case 2: sum_pixels<kBf16, 2>(p.src, at, p.c, q0, q1, tail, total); break;
                    case 3: sum_pixels<kBf16, 3>(p.src, at, p.c, q0, q1, tail, total); break;
                    default: sum_pixels<kBf16, 4>(p.src, at, p.c, q0, q1, tail, total); break;
                }
                for (int64_t v = 0; v < vectors; ++v)
                    _mm512_storeu_ps(&partial[task * row + c0 + v * kLanes], total[v]);
            }
        }
    });
    const __m512 count = _mm512_set1_ps(static_cast<float>(p.hw));
    const int64_t vectors = row / kLanes;
    at::parallel_for(0, p.n * vectors, 64, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const int64_t image = i / vectors, c0 = i % vectors * kLanes;
            __m512 total = _mm512_setzero_ps();
            for (int64_t chunk = 0; chunk < chunks; ++chunk)
                total = _mm512_add_ps(total, _mm512_loadu_ps(&partial[(image * chunks + chunk) * row + c0]));
            store<kBf16>(p.dst, image * p.c + c0, tail_mask(p.c - c0), _mm512_div_ps(total, count));
        }
    });
}

// Pixels in order, each image's run of them against its scale row (read from L1).
void channel_scale_bf16(const ChannelScale &p) {
    const int64_t full = p.c / kLanes * kLanes;
    const __mmask16 all = 0xFFFF, tail = tail_mask(p.c - full);
    at::parallel_for(0, p.n * p.hw, greater(1, 16384 / greater(1, p.c)), [&](int64_t begin, int64_t end) {
        for (int64_t q = begin; q < end;) {
            const int64_t image = q / p.hw, stop = lesser(end, (image + 1) * p.hw);
            const uint16_t *scale = p.scale + image * p.scale_image_stride;
            for (; q < stop; ++q) {
                const int64_t at = q * p.c;
                for (int64_t j = 0; j < full; j += kLanes)
                    store<true>(p.dst, at + j, all,
                                _mm512_mul_ps(load<true>(p.src, at + j, all), load<true>(scale, j, all)));
                if (full < p.c)
                    store<true>(p.dst, at + full, tail,
                                _mm512_mul_ps(load<true>(p.src, at + full, tail), load<true>(scale, full, tail)));
            }
        }
    });
}

// One task per chunk of pixels; in it, each pixel's output row written in order, input after
// input (faster than walking each input over the chunk: 7.3 against 8.7 ms for DenseNet-121's
// 62 norms at batch 4, bf16).
constexpr int64_t kScaleShiftChunk = 32;

template <bool kBf16, bool kRelu>
void scale_shift_typed(const ScaleShift &p) {
    int64_t total = 0;
    for (int64_t i = 0; i < p.inputs; ++i) total += p.channels[i];
    const __m512 zero = _mm512_setzero_ps();
    at::parallel_for(0, (p.pixels + kScaleShiftChunk - 1) / kScaleShiftChunk, 1, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
            const int64_t q0 = task * kScaleShiftChunk, q1 = lesser(p.pixels, q0 + kScaleShiftChunk);
            for (int64_t q = q0; q < q1; ++q) {
                int64_t offset = 0;
                for (int64_t i = 0; i < p.inputs; ++i) {
                    const int64_t c = p.channels[i], full = c / kLanes * kLanes;
                    const int64_t from = q * c, to = q * total + offset;
                    auto one = [&](int64_t j, __mmask16 m) {
                        __m512 v = _mm512_fmadd_ps(load<kBf16>(p.src[i], from + j, m),
                                                   _mm512_maskz_loadu_ps(m, p.scale + offset + j),
                                                   _mm512_maskz_loadu_ps(m, p.shift + offset + j));
                        if constexpr (kRelu) v = _mm512_max_ps(zero, v);  // NaN (second operand) stays NaN
                        store<kBf16>(p.dst, to + j, m, v);
                    };
                    for (int64_t j = 0; j < full; j += kLanes) one(j, __mmask16(0xffff));
                    if (full < c) one(full, tail_mask(c - full));
                    offset += c;
                }
            }
        }
    });
}

// A pixel's two groups interleaved, 16 channels of each per step: permutex2var picks lane 2k
// from a's k and lane 2k + 1 from b's k (bf16: 32 output lanes from two 16-lane halves).
void interleave_bf16(const uint16_t *a, const uint16_t *b, uint16_t *out, int64_t cpg) {
    alignas(64) static constexpr uint16_t kIndex[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                         8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i index = _mm512_load_si512(kIndex);
    for (int64_t j = 0; j < cpg; j += kLanes) {
        const int64_t n = lesser(kLanes, cpg - j);
        const __mmask32 in = static_cast<__mmask32>((1u << n) - 1u);
        const __mmask32 out_mask = n == kLanes ? ~__mmask32(0) : static_cast<__mmask32>((1u << (2 * n)) - 1u);
        const __m512i va = _mm512_maskz_loadu_epi16(in, a + j), vb = _mm512_maskz_loadu_epi16(in, b + j);
        _mm512_mask_storeu_epi16(out + 2 * j, out_mask, _mm512_permutex2var_epi16(va, index, vb));
    }
}

void interleave_fp32(const float *a, const float *b, float *out, int64_t cpg) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int64_t j = 0; j < cpg; j += kLanes) {
        const int64_t n = lesser(kLanes, cpg - j);
        const __mmask16 in = tail_mask(n);
        const __m512 va = _mm512_maskz_loadu_ps(in, a + j), vb = _mm512_maskz_loadu_ps(in, b + j);
        _mm512_mask_storeu_ps(out + 2 * j, tail_mask(2 * n), _mm512_permutex2var_ps(va, lo, vb));
        if (n > kLanes / 2)
            _mm512_mask_storeu_ps(out + 2 * j + kLanes, tail_mask(2 * n - kLanes), _mm512_permutex2var_ps(va, hi, vb));
    }
}

}  // namespace

void run_interleave_avx512(const Interleave &p) {
    const int64_t grain = greater(1, 8192 / greater(1, p.cpg));
    at::parallel_for(0, p.pixels, grain, [&](int64_t begin, int64_t end) {
        for (int64_t q = begin; q < end; ++q) {
            if (p.bf16) {
                interleave_bf16(static_cast<const uint16_t *>(p.a) + q * p.a_stride,
                                static_cast<const uint16_t *>(p.b) + q * p.b_stride,
                                static_cast<uint16_t *>(p.dst) + q * 2 * p.cpg, p.cpg);
            } else {
                interleave_fp32(static_cast<const float *>(p.a) + q * p.a_stride,
                                static_cast<const float *>(p.b) + q * p.b_stride,
                                static_cast<float *>(p.dst) + q * 2 * p.cpg, p.cpg);
            }
        }
    });
}

namespace {

// The lanes of the three output vectors of 16 pixels x 3 channels: output lane j of vector k
// is pixel (16 k + j) / 3's channel (16 k + j) % 3. `ab` picks channels 0 and 1 from the
// first two planes (channel 2's lanes are left for the second pick), `c` then takes channel
// 2 from the third plane and keeps the other lanes.
struct ThreePlaneLanes {
    alignas(64) int32_t ab[3][16], c[3][16];
    ThreePlaneLanes() {
        for (int k = 0; k < 3; ++k)
            for (int j = 0; j < 16; ++j) {
                const int g = 16 * k + j, pixel = g / 3, channel = g % 3;
                ab[k][j] = channel == 0 ? pixel : channel == 1 ? 16 + pixel : 0;
                c[k][j] = channel == 2 ? 16 + pixel : j;
            }
    }
};

template <bool kBf16>
void three_planes_to_pixels(const ThreePlanes &p) {
    static const ThreePlaneLanes lanes;
    __m512i ab[3], c[3];
    for (int k = 0; k < 3; ++k) {
        ab[k] = _mm512_load_si512(lanes.ab[k]);
        c[k] = _mm512_load_si512(lanes.c[k]);
    }
    const int64_t blocks = (p.pixels + kLanes - 1) / kLanes;
    at::parallel_for(0, p.n * blocks, 512, [&](int64_t begin, int64_t end) {
        // (image, block) of the first task, then by steps: a division per task cost more than
        // the task's 16 pixels.
        int64_t image = begin / blocks, block = begin % blocks;
        for (int64_t task = begin; task < end; ++task, ++block) {
            if (block == blocks) {
                block = 0;
                ++image;
            }
            const int64_t q0 = block * kLanes;
            const int64_t count = lesser(kLanes, p.pixels - q0);
            const __mmask16 m = tail_mask(count);
            const float *plane = p.src + image * 3 * p.pixels + q0;
            const __m512 x0 = _mm512_maskz_loadu_ps(m, plane);
            const __m512 x1 = _mm512_maskz_loadu_ps(m, plane + p.pixels);
            const __m512 x2 = _mm512_maskz_loadu_ps(m, plane + 2 * p.pixels);
            const int64_t out = (image * p.pixels + q0) * 3;
            for (int k = 0; k < 3 && 16 * k < 3 * count; ++k) {
                const __m512 v = _mm512_permutex2var_ps(_mm512_permutex2var_ps(x0, ab[k], x1), c[k], x2);
                store<kBf16>(p.dst, out + 16 * k, tail_mask(3 * count - 16 * k), v);
            }
        }
    });
}

}  // namespace

void run_three_planes_to_pixels(const ThreePlanes &p) {
    if (p.bf16) three_planes_to_pixels<true>(p);
    else three_planes_to_pixels<false>(p);
}

void run_scale_shift(const ScaleShift &p) {
    if (p.bf16) {
        if (p.relu) scale_shift_typed<true, true>(p); else scale_shift_typed<true, false>(p);
    } else {
        if (p.relu) scale_shift_typed<false, true>(p); else scale_shift_typed<false, false>(p);
    }
}

void run_spatial_mean(const SpatialMean &p) {
    if (p.bf16) spatial_mean_typed<true>(p); else spatial_mean_typed<false>(p);
}

void run_channel_scale(const ChannelScale &p) { channel_scale_bf16(p); }

void run_pointwise(const Pointwise &p) {
    if (p.bf16) pointwise_typed<true>(p); else pointwise_typed<false>(p);
}

void run_post_ops(const Problem &p, void *data, int64_t n) {
    if (p.bf16_out) post_ops_in_place<true>(p, data, n); else post_ops_in_place<false>(p, data, n);
}

}  // namespace ipex::ops::own_kernels
