// AVX512-BF16 kernel of Int4Decode (built with the ISA flags; called after a cpuid check).
#include <immintrin.h>

#include "llm/int4_decode.h"

namespace ipex::llm::kernels {

namespace {

constexpr int kR = static_cast<int>(Int4Decode::kTileRows);
constexpr int64_t kBlock = 32;  // channels of one of a unit's four dot products

// The tile's 8 fp16 values at p as fp32.
inline __m256 widen(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }

// A 64-byte unit holds 128 channels: the low and the high nibbles are unpacked bytewise
// against 0x43 into bf16 words of value 128 + q, in the channel order Int4Decode::build packs
// (so x is read in natural order). The 128 * sum(x) this adds is removed with the zero point.
// Each of a unit's four dot products covers 32 channels in order (x0: 0-31, ..., x3: 96-127).
// kGroupBlocks 1 or 2: groups of 32 or 64 channels, each block's products summed from 0 and
// scaled by its group's scale; 0: groups of whole units, summed over the group's units, then
// scaled once.
template <int kGroupBlocks>
void decode_tiles(const Int4DecodeArgs &a, int64_t t0, int64_t t1) {
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m512i high = _mm512_set1_epi8(0x43);
    const int64_t units = a.k / Int4Decode::kUnit;
    const int64_t units_per_group = kGroupBlocks ? 1 : a.group_size / Int4Decode::kUnit;
    const int64_t groups_per_unit = kGroupBlocks ? Int4Decode::kUnit / a.group_size : 1;
    for (int64_t t = t0; t < t1; ++t) {
        const uint8_t *tile = a.data + t * units * kR * 64;
        // The tile's scales and offsets scale * (zero + 128) widened once for all its rows of x
        // (widened per unit, the broadcasts read values just stored and ran 25% slower).
        const uint16_t *s16 = a.scales + t * a.groups * kR, *z16 = a.zeros + t * a.groups * kR;
        float *ts = a.scratch, *to = a.scratch + a.groups * kR;
        const __m256 bias = _mm256_set1_ps(128.f);
        for (int64_t g = 0; g < a.groups; ++g) {
            const __m256 s = widen(s16 + g * kR);
            _mm256_store_ps(ts + g * kR, s);
            _mm256_store_ps(to + g * kR, _mm256_mul_ps(s, _mm256_add_ps(widen(z16 + g * kR), bias)));
        }
        for (int64_t m = 0; m < a.m; ++m) {
            const uint16_t *x = a.x + m * a.k;
            const float *xsum = a.xsum + m * a.groups;
            __m512 acc[kR], ga[kR];
            for (int r = 0; r < kR; ++r) acc[r] = ga[r] = _mm512_setzero_ps();
            for (int64_t u = 0; u < units; ++u) {
                const uint16_t *xu = x + u * Int4Decode::kUnit;
                const __m512bh x0 = (__m512bh)_mm512_loadu_si512(xu), x1 = (__m512bh)_mm512_loadu_si512(xu + kBlock);
                const __m512bh x2 = (__m512bh)_mm512_loadu_si512(xu + 2 * kBlock);
                const __m512bh x3 = (__m512bh)_mm512_loadu_si512(xu + 3 * kBlock);
                const uint8_t *p = tile + u * kR * 64;
                // The scales of this unit's first group (row r at [r], the next group kR on).
                const float *su = ts + (u * groups_per_unit / units_per_group) * kR;
                for (int r = 0; r < kR; ++r) {
                    const __m512i v = _mm512_loadu_si512(p + r * 64);
                    const __m512i lo = _mm512_and_si512(v, mask);
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
                    const __m512bh w0 = (__m512bh)_mm512_unpacklo_epi8(lo, high);
                    const __m512bh w1 = (__m512bh)_mm512_unpackhi_epi8(lo, high);
                    const __m512bh w2 = (__m512bh)_mm512_unpacklo_epi8(hi, high);
                    const __m512bh w3 = (__m512bh)_mm512_unpackhi_epi8(hi, high);
                    if constexpr (kGroupBlocks == 0) {
                        ga[r] = _mm512_dpbf16_ps(ga[r], w0, x0);
                        ga[r] = _mm512_dpbf16_ps(ga[r], w1, x1);
                        ga[r] = _mm512_dpbf16_ps(ga[r], w2, x2);
                        ga[r] = _mm512_dpbf16_ps(ga[r], w3, x3);
                    } else {
                        const __m512 zero = _mm512_setzero_ps();
                        const __m512 d0 = _mm512_dpbf16_ps(zero, w0, x0), d1 = _mm512_dpbf16_ps(zero, w1, x1);
                        const __m512 d2 = _mm512_dpbf16_ps(zero, w2, x2), d3 = _mm512_dpbf16_ps(zero, w3, x3);
                        if constexpr (kGroupBlocks == 1) {
                            acc[r] = _mm512_fmadd_ps(d0, _mm512_set1_ps(su[0 * kR + r]), acc[r]);
                            acc[r] = _mm512_fmadd_ps(d1, _mm512_set1_ps(su[1 * kR + r]), acc[r]);
                            acc[r] = _mm512_fmadd_ps(d2, _mm512_set1_ps(su[2 * kR + r]), acc[r]);
                            acc[r] = _mm512_fmadd_ps(d3, _mm512_set1_ps(su[3 * kR + r]), acc[r]);
                        } else {
                            acc[r] = _mm512_fmadd_ps(_mm512_add_ps(d0, d1), _mm512_set1_ps(su[0 * kR + r]), acc[r]);
                            acc[r] = _mm512_fmadd_ps(_mm512_add_ps(d2, d3), _mm512_set1_ps(su[1 * kR + r]), acc[r]);
                        }
                    }
                }
                if constexpr (kGroupBlocks == 0) {
                    if ((u + 1) % units_per_group == 0)
                        for (int r = 0; r < kR; ++r) {
                            acc[r] = _mm512_fmadd_ps(ga[r], _mm512_set1_ps(su[r]), acc[r]);
                            ga[r] = _mm512_setzero_ps();
                        }
                }
            }
            __m256 corr = _mm256_setzero_ps();
            for (int64_t g = 0; g < a.groups; ++g)
                corr = _mm256_fmadd_ps(_mm256_load_ps(to + g * kR), _mm256_set1_ps(xsum[g]), corr);
            alignas(32) float c[kR];
            _mm256_store_ps(c, corr);
            for (int r = 0; r < kR; ++r) {
                const int64_t n = t * kR + r;
                if (n < a.n) a.out[m * a.ldo + n] = _mm512_reduce_add_ps(acc[r]) - c[r];
            }
        }
    }
}

}  // namespace

namespace {

// A unit's codes, channels 0-63 (low) and 64-127 (high) one byte each, stored as Int4Decode lays
// a unit out: byte j = 16 lane + i holds channel 8 lane + i (i < 8) or 32 + 8 lane + (i - 8) in
// its low nibble and that channel + 64 in its high one, i.e. the 8-byte runs of each half in the
// order 0, 4, 1, 5, 2, 6, 3, 7.
inline void store_unit(__m512i low, __m512i high, uint8_t *out) {
    const __m512i order = _mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7);
    const __m512i lo = _mm512_permutexvar_epi64(order, low), hi = _mm512_permutexvar_epi64(order, high);
    _mm512_storeu_si512(out, _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4)));
}

// 16 values of a row at i as fp32.
inline __m512 load16(const void *row, QuantizeSource type, int64_t i) {
    if (type == QuantizeSource::f32) return _mm512_loadu_ps(static_cast<const float *>(row) + i);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(static_cast<const uint16_t *>(row) + i));
    if (type == QuantizeSource::f16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

}  // namespace

bool int4_quantize_row_avx512(const void *row, QuantizeSource type, int64_t k, int64_t group_size, uint8_t *codes,
                              uint8_t *out, int64_t unit_stride, uint16_t *scales, uint16_t *zeros,
                              int64_t meta_stride) {
    const int64_t groups = k / group_size;
    const __m512 top = _mm512_set1_ps(15.f), none = _mm512_setzero_ps();
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    // 16 groups at a time: their minima and maxima first, then their scales and zero points as
    // one vector (the per-group scalar chain of divisions and roundings was the row's critical
    // path), then their codes.
    for (int64_t g0 = 0; g0 < groups; g0 += 16) {
        const int gn = static_cast<int>(groups - g0 < 16 ? groups - g0 : 16);
        alignas(64) float lows[16], highs[16];
        for (int j = 0; j < gn; ++j) {
            const int64_t c0 = (g0 + j) * group_size;
            __m512 lo = none, hi = none;
            __mmask16 bad = 0;
            for (int64_t c = c0; c < c0 + group_size; c += 16) {
                const __m512 x = load16(row, type, c);
                bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(x, x), none, _CMP_NEQ_UQ);  // inf or NaN
                lo = _mm512_min_ps(lo, x);
                hi = _mm512_max_ps(hi, x);
            }
            if (bad) return false;
            lows[j] = _mm512_reduce_min_ps(lo);
            highs[j] = _mm512_reduce_max_ps(hi);
        }
        // As woq::quantize_rtn: s = (max(hi, 0) - min(lo, 0)) / 15 (1 where that is 0), the
        // zero point round(-lo / s) within 0..15 (a -0 kept, as the scalar form kept it); fp32
        // division, rounding half to even.
        const __mmask16 live = static_cast<__mmask16>((1u << gn) - 1);
        const __m512 l = _mm512_maskz_load_ps(live, lows), h = _mm512_maskz_load_ps(live, highs);
        __m512 sv = _mm512_div_ps(_mm512_sub_ps(h, l), top);
        sv = _mm512_mask_mov_ps(_mm512_set1_ps(1.f), _mm512_cmp_ps_mask(sv, none, _CMP_GT_OQ), sv);
        const __m512 negated = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(l), _mm512_set1_epi32(INT32_MIN)));
        __m512 zv = _mm512_roundscale_ps(_mm512_div_ps(negated, sv), kNearest);
        zv = _mm512_mask_mov_ps(zv, _mm512_cmp_ps_mask(zv, none, _CMP_LT_OQ), none);
        zv = _mm512_mask_mov_ps(zv, _mm512_cmp_ps_mask(zv, top, _CMP_GT_OQ), top);
        // fp16 holds a scale within 2^-11 of itself inside its normal range only.
        const __mmask16 normal = _mm512_cmp_ps_mask(sv, _mm512_set1_ps(6.1035156e-05f), _CMP_GE_OQ) &
                                 _mm512_cmp_ps_mask(sv, _mm512_set1_ps(65504.f), _CMP_LE_OQ);
        if ((normal & live) != live) return false;
        alignas(64) float s32[16], z32[16];
        alignas(32) uint16_t s16[16], z16[16];
        _mm512_store_ps(s32, sv);
        _mm512_store_ps(z32, zv);
        _mm256_store_si256(reinterpret_cast<__m256i *>(s16), _mm512_cvtps_ph(sv, _MM_FROUND_TO_NEAREST_INT));
        _mm256_store_si256(reinterpret_cast<__m256i *>(z16), _mm512_cvtps_ph(zv, _MM_FROUND_TO_NEAREST_INT));
        for (int j = 0; j < gn; ++j) {
            const int64_t g = g0 + j, c0 = g * group_size;
            scales[g * meta_stride] = s16[j];
            zeros[g * meta_stride] = z16[j];
            const __m512 s = _mm512_set1_ps(s32[j]), z = _mm512_set1_ps(z32[j]);
            for (int64_t c = c0; c < c0 + group_size; c += 16) {
                __m512 x = _mm512_roundscale_ps(_mm512_div_ps(load16(row, type, c), s), kNearest);
                x = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(x, z), none), top);
                _mm_storeu_si128(reinterpret_cast<__m128i *>(codes + c), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(x)));
            }
        }
    }
    for (int64_t u = 0; u < k / Int4Decode::kUnit; ++u) {
        const uint8_t *q = codes + u * Int4Decode::kUnit;
        store_unit(_mm512_loadu_si512(q), _mm512_loadu_si512(q + 64), out + u * unit_stride);
    }
    return true;
}

void int4_tile_row_from_packed_avx512(const uint8_t *packed, int64_t k, uint8_t *out, int64_t unit_stride) {
    // 64 packed bytes hold a unit: per 32-channel block b, 16 bytes whose low nibbles are
    // channels 32 b + j and high nibbles 32 b + 16 + j (lib/woq's layout). As 128-bit lanes,
    // the low nibbles' lane b and the high nibbles' lane b are channels 32 b..32 b + 31 in order.
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (int64_t u = 0; u < k / Int4Decode::kUnit; ++u) {
        const __m512i v = _mm512_loadu_si512(packed + u * 64);
        const __m512i lo = _mm512_and_si512(v, mask), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
        store_unit(_mm512_permutex2var_epi64(lo, first, hi), _mm512_permutex2var_epi64(lo, second, hi),
                   out + u * unit_stride);
    }
}

void int4_decode_avx512(const Int4DecodeArgs &a, int64_t t0, int64_t t1) {
    if (a.group_size == kBlock) decode_tiles<1>(a, t0, t1);
    else if (a.group_size == 2 * kBlock) decode_tiles<2>(a, t0, t1);
    else decode_tiles<0>(a, t0, t1);
}

}  // namespace ipex::llm::kernels
