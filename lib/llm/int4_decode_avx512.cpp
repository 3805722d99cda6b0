// AVX512-BF16 kernel of Int4Decode (built with the ISA flags; called after a cpuid check).
#include <immintrin.h>

#include "llm/int4_decode.h"

namespace ipex::llm::kernels {

namespace {
constexpr int kR = static_cast<int>(Int4Decode::kTileRows);
}

// A 64-byte unit holds 128 channels: the low and the high nibbles are unpacked bytewise
// against 0x43 into bf16 words of value 128 + q, in the channel order Int4Decode::build packs
// (so x is read in natural order). The 128 * sum(x) this adds is removed with the zero point.
// Each of a unit's four dot products covers 32 channels in order (x0: 0-31, ..., x3: 96-127).
namespace {

// Groups of 32 or 64 channels (a.group_blocks 1 or 2 of the unit's four 32-channel dot
// products): each block's products summed from 0, then scaled by its group's scale.
void decode_small_groups(const Int4DecodeArgs &a, int64_t t0, int64_t t1) {
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m512i high = _mm512_set1_epi8(0x43);
    const int64_t units = a.k / Int4Decode::kUnit, per_unit = 4 / a.group_blocks;  // groups in a unit
    for (int64_t t = t0; t < t1; ++t) {
        const uint8_t *tile = a.data + t * units * kR * 64;
        const float *ts = a.scales + t * a.groups * kR;
        const float *to = a.offsets + t * a.groups * kR;
        for (int64_t m = 0; m < a.m; ++m) {
            const uint16_t *x = a.x + m * a.k;
            const float *xsum = a.xsum + m * a.groups;
            __m512 acc[kR];
            for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
            for (int64_t u = 0; u < units; ++u) {
                const uint16_t *xu = x + u * 128;
                const __m512bh x0 = (__m512bh)_mm512_loadu_si512(xu), x1 = (__m512bh)_mm512_loadu_si512(xu + 32);
                const __m512bh x2 = (__m512bh)_mm512_loadu_si512(xu + 64), x3 = (__m512bh)_mm512_loadu_si512(xu + 96);
                const uint8_t *p = tile + u * kR * 64;
                const float *su = ts + u * per_unit * kR;
                for (int r = 0; r < kR; ++r) {
                    const __m512i v = _mm512_loadu_si512(p + r * 64);
                    const __m512i lo = _mm512_and_si512(v, mask);
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
                    const __m512 zero = _mm512_setzero_ps();
                    __m512 d0 = _mm512_dpbf16_ps(zero, (__m512bh)_mm512_unpacklo_epi8(lo, high), x0);
                    __m512 d1 = _mm512_dpbf16_ps(zero, (__m512bh)_mm512_unpackhi_epi8(lo, high), x1);
                    __m512 d2 = _mm512_dpbf16_ps(zero, (__m512bh)_mm512_unpacklo_epi8(hi, high), x2);
                    __m512 d3 = _mm512_dpbf16_ps(zero, (__m512bh)_mm512_unpackhi_epi8(hi, high), x3);
                    if (a.group_blocks == 1) {
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
            __m256 corr = _mm256_setzero_ps();
            for (int64_t g = 0; g < a.groups; ++g)
                corr = _mm256_fmadd_ps(_mm256_loadu_ps(to + g * kR), _mm256_set1_ps(xsum[g]), corr);
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

void int4_decode_avx512(const Int4DecodeArgs &a, int64_t t0, int64_t t1) {
    if (a.group_blocks > 0) {
        decode_small_groups(a, t0, t1);
        return;
    }
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m512i high = _mm512_set1_epi8(0x43);
    const int64_t units = a.k / Int4Decode::kUnit;
    for (int64_t t = t0; t < t1; ++t) {
        const uint8_t *tile = a.data + t * units * kR * 64;
        const float *ts = a.scales + t * a.groups * kR;
        const float *to = a.offsets + t * a.groups * kR;
        for (int64_t m = 0; m < a.m; ++m) {
            const uint16_t *x = a.x + m * a.k;
            const float *xsum = a.xsum + m * a.groups;
            __m512 acc[kR];
            for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
            __m256 corr = _mm256_setzero_ps();
            for (int64_t g = 0; g < a.groups; ++g) {
                __m512 ga[kR];
                for (int r = 0; r < kR; ++r) ga[r] = _mm512_setzero_ps();
                const int64_t u0 = g * a.units_per_group, u1 = u0 + a.units_per_group;
                for (int64_t u = u0; u < u1; ++u) {
                    const uint16_t *xu = x + u * 128;
                    const __m512bh x0 = (__m512bh)_mm512_loadu_si512(xu), x1 = (__m512bh)_mm512_loadu_si512(xu + 32);
                    const __m512bh x2 = (__m512bh)_mm512_loadu_si512(xu + 64), x3 = (__m512bh)_mm512_loadu_si512(xu + 96);
                    const uint8_t *p = tile + u * kR * 64;
                    for (int r = 0; r < kR; ++r) {
                        const __m512i v = _mm512_loadu_si512(p + r * 64);
                        const __m512i lo = _mm512_and_si512(v, mask);
                        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
                        ga[r] = _mm512_dpbf16_ps(ga[r], (__m512bh)_mm512_unpacklo_epi8(lo, high), x0);
                        ga[r] = _mm512_dpbf16_ps(ga[r], (__m512bh)_mm512_unpackhi_epi8(lo, high), x1);
                        ga[r] = _mm512_dpbf16_ps(ga[r], (__m512bh)_mm512_unpacklo_epi8(hi, high), x2);
                        ga[r] = _mm512_dpbf16_ps(ga[r], (__m512bh)_mm512_unpackhi_epi8(hi, high), x3);
                    }
                }
                for (int r = 0; r < kR; ++r) acc[r] = _mm512_fmadd_ps(ga[r], _mm512_set1_ps(ts[g * kR + r]), acc[r]);
                corr = _mm256_fmadd_ps(_mm256_loadu_ps(to + g * kR), _mm256_set1_ps(xsum[g]), corr);
            }
            alignas(32) float c[kR];
            _mm256_store_ps(c, corr);
            for (int r = 0; r < kR; ++r) {
                const int64_t n = t * kR + r;
                if (n < a.n) a.out[m * a.ldo + n] = _mm512_reduce_add_ps(acc[r]) - c[r];
            }
        }
    }
}

}  // namespace ipex::llm::kernels
