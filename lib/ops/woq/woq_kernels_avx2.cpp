// AVX2 + FMA kernels of ipex::woq_linear, for CPUs without AVX-512. This file is compiled with
// -mavx2 -mfma; callers check isa::avx2_fma() first. It includes no libtorch header.
//
// The fp32 kernels and the int8 GEMV for any group size are woq_kernels_lanes.h's, on the
// 256-bit lanes below. With int8 activations, int4 weights (0..15) meet them in VPMADDUBSW, whose 16-bit pair sums
// stay below 2 * 15 * 127 and never saturate; int8 weights (0..255) would, so they are widened
// to 16 bits and multiplied with VPMADDWD instead.
//
// Batch 1 with int8 activations and int4 weights (the decode of LLMs on AVX2 CPUs) reads two
// blocks per 32-byte load: the low nibbles are channels 0-15 of both blocks, the high nibbles
// channels 16-31, so two VPMADDUBSW with x gathered the same way (two 16-byte halves) and one
// 16-bit add give the pair sums of both blocks; these add up in 16 bits over up to eight
// blocks, so a group of g >= 64 costs one VPMADDWD, one conversion and one FMA, and a pair of
// g32 groups one of each too (its two scales spread over the halves). The zero points enter
// through the group sums of x once per row, eight groups to a vector.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_kernels_lanes.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq::kernels {
namespace {

// sum_g s[g] z[g] xsum[g] over all groups of one row, eight groups at a time, as a vector of
// partial sums (lanes summed by the caller) and the scalar rest.
inline __m256 zero_term(const float *s, const float *z, const int32_t *xsum, int64_t groups, float *rest) {
    __m256 acc = _mm256_setzero_ps();
    int64_t g = 0;
    for (; g + 8 <= groups; g += 8) {
        const __m256 xs = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(xsum + g)));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(s + g), _mm256_loadu_ps(z + g)), xs, acc);
    }
    float t = 0.f;
    for (; g < groups; ++g) t += s[g] * z[g] * static_cast<float>(xsum[g]);
    *rest = t;
    return acc;
}

// 256-bit lanes for the kernels written once in woq_kernels_lanes.h.
struct Lanes {
    using V = __m256;
    static constexpr int kLanes = 8;
    // Two weight rows by four of x: eight accumulators and the eight converted weight
    // vectors fit the sixteen registers.
    static constexpr int kGemmRows = 2;
    static V zero() { return _mm256_setzero_ps(); }
    static V set1(float f) { return _mm256_set1_ps(f); }
    static V load(const float *p) { return _mm256_loadu_ps(p); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static float sum(V v) { return hsum256(v); }
    static void store_first(float *dst, V v, int64_t n) {
        if (n >= kLanes) {
            _mm256_storeu_ps(dst, v);
            return;
        }
        alignas(32) float tmp[kLanes];
        _mm256_store_ps(tmp, v);
        for (int64_t e = 0; e < n; ++e) dst[e] = tmp[e];
    }
    // The 32 weights of one block as four vectors of 8 floats (channels 0-7, 8-15, 16-23, 24-31).
    template <int kBits>
    static void load_block(const uint8_t *src, V v[4]) {
        if constexpr (kBits == 4) {
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
            const __m256i lo = _mm256_cvtepu8_epi32(b);                     // bytes 0-7
            const __m256i hi = _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));  // bytes 8-15
            const __m256i mask = _mm256_set1_epi32(0x0f);
            v[0] = _mm256_cvtepi32_ps(_mm256_and_si256(lo, mask));
            v[1] = _mm256_cvtepi32_ps(_mm256_and_si256(hi, mask));
            v[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(lo, 4));
            v[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(hi, 4));
        } else {
            for (int j = 0; j < 4; ++j)
                v[j] = _mm256_cvtepi32_ps(
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(src + 8 * j))));
        }
    }
    // int4 weights (0..15) meet int8 x in VPMADDUBSW, whose pair sums never saturate; int8
    // weights (0..255) would, so they are widened to 16 bits for VPMADDWD instead.
    template <int kBits>
    static __m256i dot_s8(__m256i acc, const uint8_t *src, __m256i x) {
        if constexpr (kBits == 4) {
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
            const __m128i mask = _mm_set1_epi8(0x0f);
            const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(b, mask)),
                                                      _mm_and_si128(_mm_srli_epi16(b, 4), mask), 1);
            return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1)));
        } else {
            const __m256i q0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src)));
            const __m256i q1 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 16)));
            const __m256i x0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(x));
            const __m256i x1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(x, 1));
            return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(q0, x0), _mm256_madd_epi16(q1, x1)));
        }
    }
};

// x gathered for one pair of int4 blocks (64 channels from x): lo = channels 0-15 and 32-47,
// hi = 16-31 and 48-63, the order of the low and high nibbles of the pair's 32 bytes.
struct XPair {
    __m256i lo, hi;
};

inline XPair load_x_pair(const int8_t *x) {
    const auto half = [x](int64_t off) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(x + off)); };
    return {_mm256_inserti128_si256(_mm256_castsi128_si256(half(0)), half(32), 1),
            _mm256_inserti128_si256(_mm256_castsi128_si256(half(16)), half(48), 1)};
}

// q * x over one pair of int4 blocks as 16 int16 sums of four products each: lanes 0-7 from
// the first block, 8-15 from the second. |sum| <= 4 * 15 * 127, so eight such vectors (16
// blocks) may still be added in 16 bits; kFlushPairs keeps to four.
inline __m256i dot_pair_s16(const uint8_t *src, const XPair &x, __m256i nibble) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src));
    const __m256i lo = _mm256_and_si256(raw, nibble);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, x.lo), _mm256_maddubs_epi16(hi, x.hi));
}

constexpr int64_t kFlushPairs = 4;
constexpr int64_t kPairBytes = kBlock;  // two int4 blocks

// The decode kernel of int4 weights and int8 activations (see the top of the file) for kR
// rows and one row of x: out[n + r] = xscale * (sum_g s (dot_g - z xsum_g)).
// Group kinds: g32 (two groups per pair), or every group whole pairs (g % 64 == 0), or one
// group over the row (per channel, possibly ending in a single block).
template <int kR>
void gemv_s8_int4_rows(const WeightView &w, const int8_t *x, const int32_t *xsum, float xscale, float *out, int64_t n) {
    const int64_t rb = w.row_bytes(), blocks = w.kp / kBlock, pairs = blocks / 2;
    const uint8_t *rows[kR];
    const float *scales[kR];
    for (int r = 0; r < kR; ++r) {
        rows[r] = w.qweight + (n + r) * rb;
        scales[r] = w.scales + (n + r) * w.groups;
    }
    const __m256i nibble = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[kR];
    for (int r = 0; r < kR; ++r) acc[r] = _mm256_setzero_ps();
    if (w.groups > 1 && w.group_size == kBlock) {
        // Lanes 0-3 of a pair's int32 sums belong to group 2p, 4-7 to group 2p + 1.
        const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        for (int64_t p = 0; p < pairs; ++p) {
            prefetch_next_tile<kR>(rows, rb, p * kPairBytes);
            const XPair xp = load_x_pair(x + p * 2 * kBlock);
            for (int r = 0; r < kR; ++r) {
                const __m256i d = _mm256_madd_epi16(dot_pair_s16(rows[r] + p * kPairBytes, xp, nibble), ones);
                // The pair's two scales broadcast as one 64-bit lane (an unaligned load: the
                // scales are floats, 4-byte aligned).
                const __m256 s2 = _mm256_castsi256_ps(_mm256_broadcastq_epi64(
                    _mm_loadl_epi64(reinterpret_cast<const __m128i *>(scales[r] + 2 * p))));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_permutevar_ps(s2, spread), acc[r]);
            }
        }
    } else {
        // Whole pairs per group (groups == 1: all pairs, then perhaps one block).
        const int64_t ppg = w.groups == 1 ? pairs : w.group_size / (2 * kBlock);
        for (int64_t g = 0; g < w.groups; ++g) {
            for (int64_t p0 = g * ppg; p0 < (g + 1) * ppg; p0 += kFlushPairs) {
                __m256i s16[kR];
                for (int r = 0; r < kR; ++r) s16[r] = _mm256_setzero_si256();
                const int64_t p1 = std::min(p0 + kFlushPairs, (g + 1) * ppg);
                for (int64_t p = p0; p < p1; ++p) {
                    prefetch_next_tile<kR>(rows, rb, p * kPairBytes);
                    const XPair xp = load_x_pair(x + p * 2 * kBlock);
                    for (int r = 0; r < kR; ++r)
                        s16[r] = _mm256_add_epi16(s16[r], dot_pair_s16(rows[r] + p * kPairBytes, xp, nibble));
                }
                for (int r = 0; r < kR; ++r)
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s16[r], ones)),
                                             _mm256_broadcast_ss(scales[r] + g), acc[r]);
            }
        }
    }
    if (blocks % 2 != 0) {  // the last block alone: its group is the last one
        const int64_t b = blocks - 1;
        for (int r = 0; r < kR; ++r)
            acc[r] = _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(Lanes::dot_s8<4>(_mm256_setzero_si256(), rows[r] + b * (kBlock / 2),
                                                    _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + b * kBlock)))),
                _mm256_broadcast_ss(scales[r] + w.groups - 1), acc[r]);
    }
    for (int r = 0; r < kR; ++r) {
        float rest = 0.f;
        const __m256 zt = zero_term(scales[r], w.zeros + (n + r) * w.groups, xsum, w.groups, &rest);
        out[n + r] = (hsum256(_mm256_sub_ps(acc[r], zt)) - rest) * xscale;
    }
}

// Group sizes gemv_s8_int4_rows handles.
bool int4_pair_groups(const WeightView &w) {
    return w.bits == 4 && (w.groups == 1 || w.group_size == kBlock || w.group_size % (2 * kBlock) == 0);
}

template <int kBits>
void gemv_s8_int4_or_any(const WeightView &w, const GemvS8 &a, int64_t n0, int64_t n1) {
    int64_t n = n0;
    if (int4_pair_groups(w)) {
        for (int64_t m = 0; m < a.m; ++m) {
            const int8_t *x = a.xq + m * w.kp;
            const int32_t *xsum = a.xsum + m * w.groups;
            float *out = a.out + m * a.ldo;
            for (n = n0; n + kRows <= n1; n += kRows) gemv_s8_int4_rows<kRows>(w, x, xsum, a.xscale[m], out, n);
            for (; n < n1; ++n) gemv_s8_int4_rows<1>(w, x, xsum, a.xscale[m], out, n);
        }
        return;
    }
    gemv_s8_range<Lanes, kBits>(w, a, n0, n1);
}

}  // namespace

void gemv_f32_avx2(const WeightView &w, const GemvF32 &a, int64_t n_begin, int64_t n_end) {
    gemv_f32<Lanes>(w, a, n_begin, n_end);
}

void gemv_s8_avx2(const WeightView &w, const GemvS8 &a, int64_t n_begin, int64_t n_end) {
    if (w.bits == 4) gemv_s8_int4_or_any<4>(w, a, n_begin, n_end);
    else gemv_s8_int4_or_any<8>(w, a, n_begin, n_end);
}

void quantize_s8_avx2(const QuantizeS8 &q) {
    const __m256 sign = _mm256_set1_ps(-0.f), lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const int64_t groups = q.k / q.group_size;
    for (int64_t i = 0; i < q.m; ++i) {
        const float *x = q.x + i * q.k;
        __m256 vmax = _mm256_setzero_ps();
        int64_t c = 0;
        for (; c + 8 <= q.k; c += 8) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + c)));
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, vmax);
        float amax = 0.f;
        for (float v : lanes) amax = std::max(amax, v);
        for (; c < q.k; ++c) amax = std::max(amax, std::fabs(x[c]));
        const float scale = amax / 127.f > 0.f ? amax / 127.f : 1.f;
        const __m256 sv = _mm256_set1_ps(scale);
        int8_t *xq = q.xq + i * q.kp;
        const auto quant8 = [&](int64_t off) {
            const __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + off), sv),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
        };
        for (c = 0; c + 32 <= q.k; c += 32) {
            const __m256i p01 = _mm256_packs_epi32(quant8(c), quant8(c + 8));
            const __m256i p23 = _mm256_packs_epi32(quant8(c + 16), quant8(c + 24));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(xq + c),
                                _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order));
        }
        for (; c < q.k; ++c)
            xq[c] = static_cast<int8_t>(std::min(std::max(std::nearbyint(x[c] / scale), -127.f), 127.f));
        for (; c < q.kp; ++c) xq[c] = 0;
        q.xscale[i] = scale;
        for (int64_t g = 0; g < groups; ++g) {
            int64_t k0 = g * q.group_size;
            const int64_t k1 = k0 + q.group_size;
            __m256i acc = _mm256_setzero_si256();
            const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
            for (; k0 + 32 <= k1; k0 += 32) {
                const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq + k0));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16));
            }
            alignas(32) int32_t parts[8];
            _mm256_store_si256(reinterpret_cast<__m256i *>(parts), acc);
            int32_t sum = 0;
            for (int32_t v : parts) sum += v;
            for (; k0 < k1; ++k0) sum += xq[k0];
            q.xsum[i * groups + g] = sum;
        }
    }
}

void dequant_f32_avx2(const WeightView &w, float *dst, int64_t ld, int64_t n_begin, int64_t n_end) {
    dequant_f32<Lanes>(w, dst, ld, n_begin, n_end);
}

}  // namespace ipex::woq::kernels
