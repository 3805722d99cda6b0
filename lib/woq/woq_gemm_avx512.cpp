// Large-batch bf16 kernel of ipex::woq_linear (AVX512-BF16). Compiled with the AVX-512 flags
// like woq_kernels_avx512.cpp; callers check kernels::bf16_usable() first. No libtorch or
// standard library header: nothing inline from a library is built with these flags.
//
// out^T = W x^T a panel of weight rows at a time. x comes packed by channel pairs,
// [kp/2][mp][2] bf16, so one 512-bit load holds a channel pair for 16 rows of x. The panel's
// weights are dequantized a chunk of input channels at a time into a small buffer (bf16, the
// same rounding as the portable dequantization), and each (row, channel pair) of it is a
// 32-bit broadcast operand of VDPBF16PS against those loads: one dequantization serves every
// row of x, and the inner loop is dot products on registers (kR weight rows x kMB blocks of
// 16 x rows of fp32 accumulators).
#include <immintrin.h>

#include <cstring>

#include "woq/woq_kernels.h"
#include "woq/woq_layout.h"

namespace ipex::woq::kernels {
namespace {

// Input channels per dequantized chunk and weight rows per panel: the chunk of the panel
// (kPanelRows x kChunkK bf16) and the matching chunk of x stay in L1/L2 while they are reused.
constexpr int64_t kChunkK = 256;
constexpr int64_t kPanelRows = kGemmPanelRows;
// 16-row blocks of x per pass over a panel (bounds the accumulator buffer; larger batches
// take several passes, each reading the panel's quantized weights again from cache).
constexpr int64_t kSlabBlocks = 8;

// Heap buffer with cache-line alignment (aligned operator new; no library templates).
struct alignas(64) Line {
    unsigned char bytes[64];
};
struct Buffer {
    explicit Buffer(int64_t bytes) : lines(new Line[(bytes + 63) / 64]) {}
    ~Buffer() { delete[] lines; }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    template <typename T>
    T *as() const { return reinterpret_cast<T *>(lines); }
    Line *lines;
};

// Weight rows [n0, n0 + rows), channels [k0, k0 + kc) (multiples of 32) as bf16 to dst,
// row r at dst + r * ld. Each value is bf16((q - zero) * scale), rounded to nearest even.
template <int kBits>
void dequant_chunk(const WeightView &w, int64_t n0, int64_t rows, int64_t k0, int64_t kc, uint16_t *dst, int64_t ld) {
    const int64_t bpg = (w.groups == 1 ? w.kp : w.group_size) / kBlock;
    const int64_t b0 = k0 / kBlock, b1 = (k0 + kc) / kBlock;
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t n = n0 + r;
        const uint8_t *row = w.qweight + n * w.row_bytes();
        uint16_t *out = dst + r * ld - k0;  // indexed by channel
        // The next chunk of this row: rows lie kp/2 (kp) bytes apart, a stride the hardware
        // prefetchers do not follow across a panel, so without this every chunk waits on memory.
        const int64_t bb = kBits == 4 ? kBlock / 2 : kBlock, next = b1 * bb, next_end = next + (b1 - b0) * bb;
        for (int64_t off = next; off < next_end && off < w.row_bytes(); off += 64)
            _mm_prefetch(reinterpret_cast<const char *>(row + off), _MM_HINT_T1);
        for (int64_t b = b0; b < b1;) {
            const int64_t g = b / bpg, end = (g + 1) * bpg < b1 ? (g + 1) * bpg : b1;
            const __m512 s = _mm512_set1_ps(w.scales[n * w.groups + g]);
            const __m512 z = _mm512_set1_ps(w.zeros[n * w.groups + g]);
            if constexpr (kBits == 4) {
                // Table of the 16 possible values; each block is one VPERMW of its nibbles.
                const __m256i half = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_sub_ps(iota, z), s)));
                const __m512i lut = _mm512_inserti64x4(_mm512_castsi256_si512(half), half, 1);
                for (; b < end; ++b) {
                    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + b * (kBlock / 2)));
                    const __m128i lo = _mm_and_si128(bytes, mask);
                    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
                    const __m512i idx = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
                    _mm512_storeu_si512(out + b * kBlock, _mm512_permutexvar_epi16(idx, lut));
                }
            } else {
                for (; b < end; ++b) {
                    for (int h = 0; h < 2; ++h) {
                        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + b * kBlock + h * 16));
                        const __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)), z), s);
                        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + b * kBlock + h * 16),
                                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
                    }
                }
            }
        }
    }
}

// acc[r][16 * j + i] += sum over `pairs` channel pairs p of w[r][p] . x[p][16 * j + i] for kR
// weight rows (w: bf16 pairs, row stride ldw pairs) and kMB blocks of 16 rows of x (x: pair p
// at x + p * ldx, in 32-bit units).
template <int kMB, int kR>
void tile(const uint32_t *x, int64_t ldx, const uint32_t *w, int64_t ldw, int64_t pairs, float *acc, int64_t lda) {
    __m512 c[kR][kMB];
    for (int r = 0; r < kR; ++r)
        for (int j = 0; j < kMB; ++j) c[r][j] = _mm512_loadu_ps(acc + r * lda + 16 * j);
    for (int64_t p = 0; p < pairs; ++p) {
        __m512bh xv[kMB];
        for (int j = 0; j < kMB; ++j) xv[j] = (__m512bh)_mm512_loadu_si512(x + p * ldx + 16 * j);
        for (int r = 0; r < kR; ++r) {
            const __m512bh wv = (__m512bh)_mm512_set1_epi32(static_cast<int>(w[r * ldw + p]));
            for (int j = 0; j < kMB; ++j) c[r][j] = _mm512_dpbf16_ps(c[r][j], xv[j], wv);
        }
    }
    for (int r = 0; r < kR; ++r)
        for (int j = 0; j < kMB; ++j) _mm512_storeu_ps(acc + r * lda + 16 * j, c[r][j]);
}

// Weight rows per tile for kMB blocks of x: accumulators plus x registers within the 32.
template <int kMB>
constexpr int rows_per_tile() {
    return kMB == 1 ? 28 : kMB == 2 ? 14 : kMB == 3 ? 8 : 6;
}

// tile<kMB, rows> for a run-time rows <= kR.
template <int kMB, int kR>
struct TileOfRows {
    static void run(int rows, const uint32_t *x, int64_t ldx, const uint32_t *w, int64_t ldw, int64_t pairs, float *acc,
                    int64_t lda) {
        if (rows == kR) tile<kMB, kR>(x, ldx, w, ldw, pairs, acc, lda);
        else TileOfRows<kMB, kR - 1>::run(rows, x, ldx, w, ldw, pairs, acc, lda);
    }
};
template <int kMB>
struct TileOfRows<kMB, 0> {
    static void run(int, const uint32_t *, int64_t, const uint32_t *, int64_t, int64_t, float *, int64_t) {}
};

// All rows of a panel chunk for kMB blocks of x.
template <int kMB>
void panel_blocks(int64_t rows, const uint32_t *x, int64_t ldx, const uint32_t *w, int64_t ldw, int64_t pairs,
                  float *acc, int64_t lda) {
    constexpr int kR = rows_per_tile<kMB>();
    int64_t r = 0;
    for (; r + kR <= rows; r += kR) tile<kMB, kR>(x, ldx, w + r * ldw, ldw, pairs, acc + r * lda, lda);
    if (r < rows) TileOfRows<kMB, kR - 1>::run(static_cast<int>(rows - r), x, ldx, w + r * ldw, ldw, pairs, acc + r * lda, lda);
}

void panel(const WeightView &w, const GemmBF16 &a, int64_t n0, int64_t rows, uint16_t *wbuf, float *acc) {
    const int64_t mblocks = a.mp / 16;
    for (int64_t s0 = 0; s0 < mblocks; s0 += kSlabBlocks) {
        const int64_t nb = mblocks - s0 < kSlabBlocks ? mblocks - s0 : kSlabBlocks, lda = nb * 16;
        std::memset(acc, 0, sizeof(float) * static_cast<size_t>(rows * lda));
        for (int64_t k0 = 0; k0 < w.kp; k0 += kChunkK) {
            const int64_t kc = w.kp - k0 < kChunkK ? w.kp - k0 : kChunkK;
            if (w.bits == 4) dequant_chunk<4>(w, n0, rows, k0, kc, wbuf, kChunkK);
            else dequant_chunk<8>(w, n0, rows, k0, kc, wbuf, kChunkK);
            const uint32_t *wp = reinterpret_cast<const uint32_t *>(wbuf);
            // Blocks of x two at a time (one three when their count is odd).
            for (int64_t j = 0; j < nb;) {
                const uint32_t *x = a.xp + (k0 / 2) * a.mp + (s0 + j) * 16;
                float *c = acc + j * 16;
                const int64_t left = nb - j;
                if (left == 1) {
                    panel_blocks<1>(rows, x, a.mp, wp, kChunkK / 2, kc / 2, c, lda);
                    j += 1;
                } else if (left == 3) {
                    panel_blocks<3>(rows, x, a.mp, wp, kChunkK / 2, kc / 2, c, lda);
                    j += 3;
                } else {
                    panel_blocks<2>(rows, x, a.mp, wp, kChunkK / 2, kc / 2, c, lda);
                    j += 2;
                }
            }
        }
        const int64_t m_end = (s0 + nb) * 16 < a.m ? (s0 + nb) * 16 : a.m;
        for (int64_t m = s0 * 16; m < m_end; ++m) {
            float *o = a.out + m * a.ldo + n0;
            const float *c = acc + (m - s0 * 16);
            for (int64_t r = 0; r < rows; ++r) o[r] = c[r * lda];
        }
    }
}

}  // namespace

void gemm_bf16_avx512(const WeightView &w, const GemmBF16 &a, int64_t n_begin, int64_t n_end) {
    const Buffer wbuf(kPanelRows * kChunkK * 2);
    const Buffer acc(kPanelRows * kSlabBlocks * 16 * 4);
    for (int64_t n = n_begin; n < n_end; n += kPanelRows) {
        const int64_t rows = n_end - n < kPanelRows ? n_end - n : kPanelRows;
        panel(w, a, n, rows, wbuf.as<uint16_t>(), acc.as<float>());
    }
}

}  // namespace ipex::woq::kernels
