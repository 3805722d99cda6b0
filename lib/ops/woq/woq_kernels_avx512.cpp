// AVX-512 kernels of ipex::woq_linear. This file is compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512bf16 -mavx512vnni -mfma; callers check isa::avx512() and friends
// first. It includes no libtorch header, so no inline library code is built with these flags.
//
// Batch-1 decode reads each weight once: int4 nibbles are widened and converted in
// registers, four output channels share every activation load, the per-group dot products
// are scaled once per group, and the zero points are folded in through the group sums of x:
//   y[n] = sum_g s[n,g] * (sum_{k in g} q[n,k] x[k] - z[n,g] * sum_{k in g} x[k]).
#include <immintrin.h>

#include "kernels/avx512/math.h"
#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq::kernels {
namespace {

constexpr int kRows = 4;  // output channels per step
// Software prefetch: while a tile of kRows weight rows is read, the same positions of a tile
// further on are fetched (every byte once); with several short rows read side by side the
// hardware prefetchers fall behind. Tiles ahead: measured on Zen 4, 1 tile leaves the 2 KiB
// rows of 4096 input channels at ~9 GB/s, 3-4 tiles reach 12-17 GB/s on one core.
constexpr int64_t kPrefetchTiles = 4;

// Prefetches, for each of the kR rows, the byte `offset` of the row kPrefetchTiles tiles
// further on (once per 64-byte line).
template <int kR>
inline void prefetch_next_tile(const uint8_t *const *rows, int64_t row_bytes, int64_t offset) {
    if (offset % 64 != 0) return;
    for (int r = 0; r < kR; ++r)
        _mm_prefetch(reinterpret_cast<const char *>(rows[r] + offset + kPrefetchTiles * kR * row_bytes), _MM_HINT_T0);
}

int64_t blocks_per_group(const WeightView &w) { return (w.groups == 1 ? w.kp : w.group_size) / kBlock; }
int64_t block_bytes(const WeightView &w) { return w.bits == 4 ? kBlock / 2 : kBlock; }

// The 32 weights of one block as two vectors of 16 floats (channels 0-15 and 16-31).
template <int kBits>
inline void load_block_f32(const uint8_t *src, __m512 &lo, __m512 &hi) {
    if constexpr (kBits == 4) {
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src)));
        lo = _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(0x0f)));
        hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
    } else {
        lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src))));
        hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 16))));
    }
}

// The 32 weights of one block as 32 unsigned bytes in channel order.
template <int kBits>
inline __m256i load_block_u8(const uint8_t *src) {
    if constexpr (kBits == 4) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
        const __m128i mask = _mm_set1_epi8(0x0f);
        const __m128i lo = _mm_and_si128(b, mask);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
        return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    } else {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src));
    }
}

template <int kBits, int kR>
void gemv_f32_rows(const WeightView &w, const GemvF32 &a, int64_t n) {
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w), bb = block_bytes(w);
    const uint8_t *rows[kR];
    for (int r = 0; r < kR; ++r) rows[r] = w.qweight + (n + r) * rb;
    for (int64_t m = 0; m < a.m; ++m) {
        const float *x = a.x + m * w.kp;
        const float *xsum = a.xsum + m * w.groups;
        __m512 acc[kR];
        float corr[kR];
        for (int r = 0; r < kR; ++r) {
            acc[r] = _mm512_setzero_ps();
            corr[r] = 0.f;
        }
        for (int64_t g = 0; g < w.groups; ++g) {
            __m512 ga[kR];
            for (int r = 0; r < kR; ++r) ga[r] = _mm512_setzero_ps();
            for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
                const __m512 x0 = _mm512_loadu_ps(x + b * kBlock);
                const __m512 x1 = _mm512_loadu_ps(x + b * kBlock + 16);
                if (m == 0) prefetch_next_tile<kR>(rows, rb, b * bb);
                for (int r = 0; r < kR; ++r) {
                    __m512 lo, hi;
                    load_block_f32<kBits>(rows[r] + b * bb, lo, hi);
                    ga[r] = _mm512_fmadd_ps(lo, x0, ga[r]);
                    ga[r] = _mm512_fmadd_ps(hi, x1, ga[r]);
                }
            }
            for (int r = 0; r < kR; ++r) {
                const float s = w.scales[(n + r) * w.groups + g];
                acc[r] = _mm512_fmadd_ps(ga[r], _mm512_set1_ps(s), acc[r]);
                corr[r] += s * w.zeros[(n + r) * w.groups + g] * xsum[g];
            }
        }
        for (int r = 0; r < kR; ++r) a.out[m * a.ldo + n + r] = _mm512_reduce_add_ps(acc[r]) - corr[r];
    }
}

// kR weight rows x kM activation rows: each weight block is converted and scaled once and
// used for kM rows of x.
template <int kBits, int kR, int kM>
void gemm_f32_tile(const WeightView &w, const GemvF32 &a, int64_t n, int64_t m0) {
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w), bb = block_bytes(w);
    __m512 acc[kR][kM];
    float corr[kR][kM];
    for (int r = 0; r < kR; ++r)
        for (int i = 0; i < kM; ++i) {
            acc[r][i] = _mm512_setzero_ps();
            corr[r][i] = 0.f;
        }
    for (int64_t g = 0; g < w.groups; ++g) {
        __m512 sv[kR];
        for (int r = 0; r < kR; ++r) {
            const float s = w.scales[(n + r) * w.groups + g];
            const float sz = s * w.zeros[(n + r) * w.groups + g];
            sv[r] = _mm512_set1_ps(s);
            for (int i = 0; i < kM; ++i) corr[r][i] += sz * a.xsum[(m0 + i) * w.groups + g];
        }
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            __m512 lo[kR], hi[kR];
            for (int r = 0; r < kR; ++r) {
                load_block_f32<kBits>(w.qweight + (n + r) * rb + b * bb, lo[r], hi[r]);
                lo[r] = _mm512_mul_ps(lo[r], sv[r]);
                hi[r] = _mm512_mul_ps(hi[r], sv[r]);
            }
            for (int i = 0; i < kM; ++i) {
                const float *x = a.x + (m0 + i) * w.kp + b * kBlock;
                const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
                for (int r = 0; r < kR; ++r) {
                    acc[r][i] = _mm512_fmadd_ps(lo[r], x0, acc[r][i]);
                    acc[r][i] = _mm512_fmadd_ps(hi[r], x1, acc[r][i]);
                }
            }
        }
    }
    for (int r = 0; r < kR; ++r)
        for (int i = 0; i < kM; ++i) a.out[(m0 + i) * a.ldo + n + r] = _mm512_reduce_add_ps(acc[r][i]) - corr[r][i];
}

template <int kBits, int kR>
void gemm_f32_rows(const WeightView &w, const GemvF32 &a, int64_t n) {
    constexpr int kTileM = 4;
    int64_t m = 0;
    for (; m + kTileM <= a.m; m += kTileM) gemm_f32_tile<kBits, kR, kTileM>(w, a, n, m);
    switch (a.m - m) {
    case 3: gemm_f32_tile<kBits, kR, 3>(w, a, n, m); break;
    case 2: gemm_f32_tile<kBits, kR, 2>(w, a, n, m); break;
    case 1: gemm_f32_tile<kBits, kR, 1>(w, a, n, m); break;
    default: break;
    }
}

// bf16 values of 0..15 (entries 16..31 repeat them), the lookup for int4 nibbles.
alignas(64) constexpr uint16_t kBf16OfNibble[32] = {
    0x0000, 0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0, 0x40e0, 0x4100, 0x4110, 0x4120,
    0x4130, 0x4140, 0x4150, 0x4160, 0x4170, 0x0000, 0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0,
    0x40c0, 0x40e0, 0x4100, 0x4110, 0x4120, 0x4130, 0x4140, 0x4150, 0x4160, 0x4170};

template <int kR>
void gemv_bf16_rows(const WeightView &w, const GemvBF16 &a, int64_t n) {
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w);
    const __m512i lut = _mm512_load_si512(kBf16OfNibble);
    const __m128i mask = _mm_set1_epi8(0x0f);
    const uint8_t *rows[kR];
    for (int r = 0; r < kR; ++r) rows[r] = w.qweight + (n + r) * rb;
    for (int64_t m = 0; m < a.m; ++m) {
        const uint16_t *x = a.x + m * w.kp;
        const float *xsum = a.xsum + m * w.groups;
        __m512 acc[kR];
        float corr[kR];
        for (int r = 0; r < kR; ++r) {
            acc[r] = _mm512_setzero_ps();
            corr[r] = 0.f;
        }
        for (int64_t g = 0; g < w.groups; ++g) {
            __m512 ga[kR];
            for (int r = 0; r < kR; ++r) ga[r] = _mm512_setzero_ps();
            for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
                const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + b * kBlock);
                if (m == 0) prefetch_next_tile<kR>(rows, rb, b * (kBlock / 2));
                for (int r = 0; r < kR; ++r) {
                    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(rows[r] + b * (kBlock / 2)));
                    const __m128i lo = _mm_and_si128(bytes, mask);
                    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
                    const __m512i idx = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
                    const __m512bh wv = (__m512bh)_mm512_permutexvar_epi16(idx, lut);
                    ga[r] = _mm512_dpbf16_ps(ga[r], wv, xv);
                }
            }
            for (int r = 0; r < kR; ++r) {
                const float s = w.scales[(n + r) * w.groups + g];
                acc[r] = _mm512_fmadd_ps(ga[r], _mm512_set1_ps(s), acc[r]);
                corr[r] += s * w.zeros[(n + r) * w.groups + g] * xsum[g];
            }
        }
        for (int r = 0; r < kR; ++r) a.out[m * a.ldo + n + r] = _mm512_reduce_add_ps(acc[r]) - corr[r];
    }
}

// Two blocks per step in pair order (woq_kernels.h): the nibbles of both blocks are spread
// over one 512-bit register and unpacked bytewise against 0x43, which makes bf16 words of
// value 128 + q (exact), so no lookup is needed; the 128 * sum(x) this adds is taken off with
// the zero point: y = s * (dot - (zero + 128) * sum(x)). kM rows of x share each unpacked pair.
template <int kR, int kM>
void gemv_bf16_pair_tile(const WeightView &w, const GemvBF16 &a, int64_t n, int64_t m0) {
    constexpr float kBias = 128.f;
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w);
    const __m256i mask = _mm256_set1_epi8(0x0f);
    const __m512i high = _mm512_set1_epi8(0x43);
    const uint8_t *rows[kR];
    for (int r = 0; r < kR; ++r) rows[r] = w.qweight + (n + r) * rb;
    __m512 acc[kR][kM];
    float corr[kR][kM];
    for (int r = 0; r < kR; ++r)
        for (int i = 0; i < kM; ++i) {
            acc[r][i] = _mm512_setzero_ps();
            corr[r][i] = 0.f;
        }
    for (int64_t g = 0; g < w.groups; ++g) {
        __m512 ga[kR][kM];
        for (int r = 0; r < kR; ++r)
            for (int i = 0; i < kM; ++i) ga[r][i] = _mm512_setzero_ps();
        for (int64_t b = g * bpg; b < (g + 1) * bpg; b += 2) {
            __m512bh x0[kM], x1[kM];
            for (int i = 0; i < kM; ++i) {
                const uint16_t *x = a.x + (m0 + i) * w.kp + b * kBlock;
                x0[i] = (__m512bh)_mm512_loadu_si512(x);
                x1[i] = (__m512bh)_mm512_loadu_si512(x + kBlock);
            }
            if (m0 == 0) prefetch_next_tile<kR>(rows, rb, b * (kBlock / 2));
            for (int r = 0; r < kR; ++r) {
                const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(rows[r] + b * (kBlock / 2)));
                const __m256i lo = _mm256_and_si256(bytes, mask);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
                const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                const __m512bh u0 = (__m512bh)_mm512_unpacklo_epi8(both, high);
                const __m512bh u1 = (__m512bh)_mm512_unpackhi_epi8(both, high);
                for (int i = 0; i < kM; ++i) {
                    ga[r][i] = _mm512_dpbf16_ps(ga[r][i], u0, x0[i]);
                    ga[r][i] = _mm512_dpbf16_ps(ga[r][i], u1, x1[i]);
                }
            }
        }
        for (int r = 0; r < kR; ++r) {
            const float s = w.scales[(n + r) * w.groups + g];
            const float sz = s * (w.zeros[(n + r) * w.groups + g] + kBias);
            for (int i = 0; i < kM; ++i) {
                acc[r][i] = _mm512_fmadd_ps(ga[r][i], _mm512_set1_ps(s), acc[r][i]);
                corr[r][i] += sz * a.xsum[(m0 + i) * w.groups + g];
            }
        }
    }
    for (int r = 0; r < kR; ++r)
        for (int i = 0; i < kM; ++i) a.out[(m0 + i) * a.ldo + n + r] = _mm512_reduce_add_ps(acc[r][i]) - corr[r][i];
}

// Rows of x several at a time, so each unpacked weight pair serves all of them (with two
// weight rows per tile then, to stay within the 32 vector registers).
template <int kR>
void gemv_bf16_pair_rows(const WeightView &w, const GemvBF16 &a, int64_t n) {
    int64_t m = 0;
    if constexpr (kR <= 2)
        for (; m + 4 <= a.m; m += 4) gemv_bf16_pair_tile<kR, 4>(w, a, n, m);
    for (; m + 2 <= a.m; m += 2) gemv_bf16_pair_tile<kR, 2>(w, a, n, m);
    if (m < a.m) gemv_bf16_pair_tile<kR, 1>(w, a, n, m);
}

template <int kBits, int kR>
void gemv_s8_rows(const WeightView &w, const GemvS8 &a, int64_t n) {
    const int64_t rb = w.row_bytes(), bpg = blocks_per_group(w), bb = block_bytes(w);
    const uint8_t *rows[kR];
    for (int r = 0; r < kR; ++r) rows[r] = w.qweight + (n + r) * rb;
    for (int64_t m = 0; m < a.m; ++m) {
        const int8_t *x = a.xq + m * w.kp;
        const int32_t *xsum = a.xsum + m * w.groups;
        __m256 acc[kR];
        float corr[kR];
        for (int r = 0; r < kR; ++r) {
            acc[r] = _mm256_setzero_ps();
            corr[r] = 0.f;
        }
        for (int64_t g = 0; g < w.groups; ++g) {
            __m256i ga[kR];
            for (int r = 0; r < kR; ++r) ga[r] = _mm256_setzero_si256();
            for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
                const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + b * kBlock));
                if (m == 0) prefetch_next_tile<kR>(rows, rb, b * bb);
                for (int r = 0; r < kR; ++r)
                    ga[r] = _mm256_dpbusd_epi32(ga[r], load_block_u8<kBits>(rows[r] + b * bb), xv);
            }
            for (int r = 0; r < kR; ++r) {
                const float s = w.scales[(n + r) * w.groups + g];
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ga[r]), _mm256_set1_ps(s), acc[r]);
                corr[r] += s * w.zeros[(n + r) * w.groups + g] * static_cast<float>(xsum[g]);
            }
        }
        for (int r = 0; r < kR; ++r) {
            const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
            const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
            const float sum = _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
            a.out[m * a.ldo + n + r] = (sum - corr[r]) * a.xscale[m];
        }
    }
}

template <int kBits>
void gemv_f32_range(const WeightView &w, const GemvF32 &a, int64_t n0, int64_t n1) {
    int64_t n = n0;
    if (a.m == 1) {
        for (; n + kRows <= n1; n += kRows) gemv_f32_rows<kBits, kRows>(w, a, n);
        for (; n < n1; ++n) gemv_f32_rows<kBits, 1>(w, a, n);
        return;
    }
    for (; n + kRows <= n1; n += kRows) gemm_f32_rows<kBits, kRows>(w, a, n);
    for (; n < n1; ++n) gemm_f32_rows<kBits, 1>(w, a, n);
}

template <int kBits>
void gemv_s8_range(const WeightView &w, const GemvS8 &a, int64_t n0, int64_t n1) {
    int64_t n = n0;
    for (; n + kRows <= n1; n += kRows) gemv_s8_rows<kBits, kRows>(w, a, n);
    for (; n < n1; ++n) gemv_s8_rows<kBits, 1>(w, a, n);
}

// One dequantized row as fp32 (all kp channels; the caller's row holds at least kp).
template <int kBits>
void dequant_row(const WeightView &w, int64_t n, float *dst) {
    const int64_t bpg = blocks_per_group(w), bb = block_bytes(w);
    const uint8_t *row = w.qweight + n * w.row_bytes();
    for (int64_t g = 0; g < w.groups; ++g) {
        const __m512 s = _mm512_set1_ps(w.scales[n * w.groups + g]);
        const __m512 z = _mm512_set1_ps(w.zeros[n * w.groups + g]);
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            __m512 lo, hi;
            load_block_f32<kBits>(row + b * bb, lo, hi);
            _mm512_storeu_ps(dst + b * kBlock, _mm512_mul_ps(_mm512_sub_ps(lo, z), s));
            _mm512_storeu_ps(dst + b * kBlock + 16, _mm512_mul_ps(_mm512_sub_ps(hi, z), s));
        }
    }
}

}  // namespace

void gemv_f32_avx512(const WeightView &w, const GemvF32 &a, int64_t n_begin, int64_t n_end) {
    if (w.bits == 4) gemv_f32_range<4>(w, a, n_begin, n_end);
    else gemv_f32_range<8>(w, a, n_begin, n_end);
}

void gemv_bf16_avx512(const WeightView &w, const GemvBF16 &a, int64_t n_begin, int64_t n_end) {
    int64_t n = n_begin;
    if (a.paired && a.m >= 4) {
        for (; n + 2 <= n_end; n += 2) gemv_bf16_pair_rows<2>(w, a, n);
        for (; n < n_end; ++n) gemv_bf16_pair_rows<1>(w, a, n);
        return;
    }
    if (a.paired) {
        for (; n + kRows <= n_end; n += kRows) gemv_bf16_pair_rows<kRows>(w, a, n);
        for (; n < n_end; ++n) gemv_bf16_pair_rows<1>(w, a, n);
        return;
    }
    for (; n + kRows <= n_end; n += kRows) gemv_bf16_rows<kRows>(w, a, n);
    for (; n < n_end; ++n) gemv_bf16_rows<1>(w, a, n);
}

void gemv_s8_avx512vnni(const WeightView &w, const GemvS8 &a, int64_t n_begin, int64_t n_end) {
    if (w.bits == 4) gemv_s8_range<4>(w, a, n_begin, n_end);
    else gemv_s8_range<8>(w, a, n_begin, n_end);
}

// Heap scratch for one padded row (raw new/delete: no inline library templates in this file).
struct Scratch {
    explicit Scratch(int64_t n) : data(new float[n]) {}
    ~Scratch() { delete[] data; }
    float *data;
};

void dequant_f32_avx512(const WeightView &w, float *dst, int64_t ld, int64_t n_begin, int64_t n_end) {
    Scratch tmp(w.kp);
    for (int64_t n = n_begin; n < n_end; ++n) {
        float *row = dst + (n - n_begin) * ld;
        float *target = w.kp == w.k ? row : tmp.data;
        if (w.bits == 4) dequant_row<4>(w, n, target);
        else dequant_row<8>(w, n, target);
        if (target != row)
            for (int64_t k = 0; k < w.k; ++k) row[k] = tmp.data[k];
    }
}

// int4 rows to bf16 through a per-group table: entry i = bf16((i - zero) * scale), so each
// block of 32 weights is one lookup (VPERMW) of its nibbles. Same rounding as converting the
// fp32 product: the table entries are those products rounded to nearest even.
static void dequant_bf16_int4_row(const WeightView &w, int64_t n, uint16_t *dst) {
    const int64_t bpg = blocks_per_group(w);
    const uint8_t *row = w.qweight + n * w.row_bytes();
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t g = 0; g < w.groups; ++g) {
        const __m512 v = _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps(w.zeros[n * w.groups + g])),
                                       _mm512_set1_ps(w.scales[n * w.groups + g]));
        const __m256i half = ::ipex::kernels::avx512::fp32_to_bf16(v);
        const __m512i lut = _mm512_inserti64x4(_mm512_castsi256_si512(half), half, 1);
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + b * (kBlock / 2)));
            const __m128i lo = _mm_and_si128(bytes, mask);
            const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
            const __m512i idx = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
            const __m512i out = _mm512_permutexvar_epi16(idx, lut);
            const int64_t k0 = b * kBlock;
            if (k0 + kBlock <= w.k) {
                _mm512_storeu_si512(dst + k0, out);
            } else if (k0 < w.k) {
                const __mmask32 keep = static_cast<__mmask32>((uint64_t(1) << (w.k - k0)) - 1);
                _mm512_mask_storeu_epi16(dst + k0, keep, out);
            }
        }
    }
}

void dequant_bf16_avx512(const WeightView &w, uint16_t *dst, int64_t ld, int64_t n_begin, int64_t n_end) {
    if (w.bits == 4) {
        for (int64_t n = n_begin; n < n_end; ++n) dequant_bf16_int4_row(w, n, dst + (n - n_begin) * ld);
        return;
    }
    Scratch tmp(w.kp);
    for (int64_t n = n_begin; n < n_end; ++n) {
        dequant_row<8>(w, n, tmp.data);
        uint16_t *row = dst + (n - n_begin) * ld;
        int64_t k = 0;
        for (; k + 16 <= w.k; k += 16) {
            const __m256i v = ::ipex::kernels::avx512::fp32_to_bf16(_mm512_loadu_ps(tmp.data + k));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(row + k), v);
        }
        if (k < w.k) {
            const __mmask16 mask = static_cast<__mmask16>((1u << (w.k - k)) - 1);
            const __m256i v =
                ::ipex::kernels::avx512::fp32_to_bf16(_mm512_maskz_loadu_ps(mask, tmp.data + k));
            _mm256_mask_storeu_epi16(row + k, mask, v);
        }
    }
}

}  // namespace ipex::woq::kernels
