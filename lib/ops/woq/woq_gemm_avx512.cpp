// Large-batch bf16 kernel of ipex::woq_linear (AVX512-BF16). Compiled with the AVX-512 flags
// like woq_kernels_avx512.cpp; callers check isa::avx512_bf16() first. No libtorch or
// standard library header: nothing inline from a library is built with these flags.
//
// out^T = W x^T a panel of weight rows at a time. x comes packed by channel pairs,
// [kp/2][mp][2] bf16, so one 512-bit load holds a channel pair for 16 rows of x. The panel's
// weights are expanded a chunk of input channels at a time into a small bf16 buffer, and each
// (row, channel pair) of it is a 32-bit broadcast operand of VDPBF16PS against those loads:
// one expansion serves every row of x, and the inner loop is dot products on registers (kR
// weight rows x kMB blocks of 16 x rows of fp32 accumulators). The expansion is either
//  - exact (int4 in pair order): nibbles unpacked bytewise against 0x43 are the bf16 words of
//    128 + q; sums are scaled per group and the zero point and the 128 are taken off at the end
//    through the group sums of x (few instructions per weight, no rounding of the weights), or
//  - dequantized: bf16((q - zero) * scale), through a per-group table for int4.
// The tiled int4 layout of LLM projections (woq_kernels.h) runs through the same register
// tiles: a chunk is one of its 128-channel units, unpacked exactly into channel order.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx512/math.h"
#include "ops/woq/woq_gemm_avx512.h"
#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq::kernels {
namespace {

// Input channels per expanded chunk and weight rows per panel: the panel's chunk (56 x 128
// bf16, 14 KiB) and x's (128 channels of up to 128 rows) stay in L1/L2 while they are reused
// (on Zen 4, chunks of 128 channels measured 2-4% faster than 256 or 512).
constexpr int64_t kChunkK = 128;
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
        for (int64_t b = b0; b < b1;) {
            const int64_t g = b / bpg, end = (g + 1) * bpg < b1 ? (g + 1) * bpg : b1;
            const __m512 s = _mm512_set1_ps(w.scales[n * w.groups + g]);
            const __m512 z = _mm512_set1_ps(w.zeros[n * w.groups + g]);
            if constexpr (kBits == 4) {
                // Table of the 16 possible values; each block is one VPERMW of its nibbles.
                const __m256i half = ::ipex::kernels::avx512::fp32_to_bf16(_mm512_mul_ps(_mm512_sub_ps(iota, z), s));
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
                                            ::ipex::kernels::avx512::fp32_to_bf16(v));
                    }
                }
            }
        }
    }
}

// Int4 rows [n0, n0 + rows), channels [k0, k0 + kc) (multiples of 64) as bf16 words 128 + q
// in pair order (woq_kernels.h), row r at dst + r * ld.
void expand_chunk_exact(const WeightView &w, int64_t n0, int64_t rows, int64_t k0, int64_t kc, uint16_t *dst, int64_t ld) {
    const __m256i mask = _mm256_set1_epi8(0x0f);
    const __m512i high = _mm512_set1_epi8(0x43);
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t *row = w.qweight + (n0 + r) * w.row_bytes();
        for (int64_t k = 0; k < kc; k += 64) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + (k0 + k) / 2));
            const __m256i lo = _mm256_and_si256(bytes, mask);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
            const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            _mm512_storeu_si512(dst + r * ld + k, _mm512_unpacklo_epi8(both, high));
            _mm512_storeu_si512(dst + r * ld + k + 32, _mm512_unpackhi_epi8(both, high));
        }
    }
}

// The quantized bytes of the next chunk for the rows of a tile: row r's `lines` cache lines
// from base + r * stride. Rows lie kp/2 (kp) bytes apart, a stride the hardware prefetchers
// do not follow across a panel; fetched during the dot products (which leave the load ports
// mostly idle), they are in cache when the chunk is expanded instead of stalling it.
struct Prefetch {
    const uint8_t *base = nullptr;
    int64_t stride = 0;
    int64_t lines = 0;
    Prefetch at_row(int64_t r) const { return {base ? base + r * stride : nullptr, stride, lines}; }
};

// How a tile's sums d enter the accumulators: acc += scale * (d - (zero + 128) * xsum) for
// row r's scale[r * ls] and zero[r * ls], or acc += scale * d - offset * xsum with the
// offset[r * ls] (= scale * (zero + 128)) of the tiled layout; no such term when both are
// null. xsum[16 j + i] is for x row 16 j + i.
struct Epilogue {
    const float *scale;
    int64_t ls;
    const float *zero = nullptr;
    const float *xsum = nullptr;
    const float *offset = nullptr;
    Epilogue at_row(int64_t r) const {
        return {scale + r * ls, ls, zero ? zero + r * ls : nullptr, xsum, offset ? offset + r * ls : nullptr};
    }
    Epilogue at_block(int64_t j) const {
        return {scale, ls, zero, zero || offset ? xsum + 16 * j : nullptr, offset};
    }
};

// acc[r][16 * j + i] += (epilogue of) sum over `pairs` channel pairs p of w[r][p] . x[p][16 * j + i]
// for kR weight rows (w: bf16 pairs, row stride ldw pairs) and kMB blocks of 16 rows of x
// (x: pair p at x + p * ldx, in 32-bit units).
template <int kMB, int kR>
void tile(const uint32_t *x, int64_t ldx, const uint32_t *w, int64_t ldw, int64_t pairs, float *acc, int64_t lda,
          const Epilogue &e, Prefetch pf) {
    __m512 c[kR][kMB];
    #pragma GCC unroll 32
    for (int r = 0; r < kR; ++r)
        #pragma GCC unroll 32
        for (int j = 0; j < kMB; ++j) c[r][j] = _mm512_setzero_ps();
    // One line a pair: row pf_row's line pf_line, walked without a division in the loop.
    const int64_t npf = pf.base ? kR * pf.lines : 0;
    const uint8_t *pf_row = pf.base;
    int64_t pf_line = 0;
    for (int64_t p = 0; p < pairs; ++p) {
        if (p < npf) {
            _mm_prefetch(reinterpret_cast<const char *>(pf_row + pf_line * 64), _MM_HINT_T0);
            if (++pf_line == pf.lines) {
                pf_line = 0;
                pf_row += pf.stride;
            }
        }
        __m512bh xv[kMB];
        #pragma GCC unroll 32
        for (int j = 0; j < kMB; ++j) xv[j] = (__m512bh)_mm512_loadu_si512(x + p * ldx + 16 * j);
        #pragma GCC unroll 32
        for (int r = 0; r < kR; ++r) {
            const __m512bh wv = (__m512bh)_mm512_set1_epi32(static_cast<int>(w[r * ldw + p]));
            #pragma GCC unroll 32
            for (int j = 0; j < kMB; ++j) c[r][j] = _mm512_dpbf16_ps(c[r][j], xv[j], wv);
        }
    }
    __m512 xs[kMB];
    if (e.xsum) {
        #pragma GCC unroll 32
        for (int j = 0; j < kMB; ++j) xs[j] = _mm512_loadu_ps(e.xsum + 16 * j);
    }
    if (e.zero) {
        #pragma GCC unroll 32
        for (int r = 0; r < kR; ++r) {
            const __m512 z = _mm512_set1_ps(e.zero[r * e.ls] + 128.f);
            #pragma GCC unroll 32
            for (int j = 0; j < kMB; ++j) c[r][j] = _mm512_fnmadd_ps(z, xs[j], c[r][j]);
        }
    }
    #pragma GCC unroll 32
    for (int r = 0; r < kR; ++r) {
        const __m512 s = _mm512_set1_ps(e.scale[r * e.ls]);
        #pragma GCC unroll 32
        for (int j = 0; j < kMB; ++j) {
            float *dst = acc + r * lda + 16 * j;
            __m512 v = _mm512_fmadd_ps(c[r][j], s, _mm512_loadu_ps(dst));
            if (e.offset) v = _mm512_fnmadd_ps(_mm512_set1_ps(e.offset[r * e.ls]), xs[j], v);
            _mm512_storeu_ps(dst, v);
        }
    }
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
                    int64_t lda, const Epilogue &e, Prefetch pf) {
        if (rows == kR) tile<kMB, kR>(x, ldx, w, ldw, pairs, acc, lda, e, pf);
        else TileOfRows<kMB, kR - 1>::run(rows, x, ldx, w, ldw, pairs, acc, lda, e, pf);
    }
};
template <int kMB>
struct TileOfRows<kMB, 0> {
    static void run(int, const uint32_t *, int64_t, const uint32_t *, int64_t, int64_t, float *, int64_t,
                    const Epilogue &, Prefetch) {}
};

// All rows of a panel chunk for kMB blocks of x.
template <int kMB>
void panel_blocks(int64_t rows, const uint32_t *x, int64_t ldx, const uint32_t *w, int64_t ldw, int64_t pairs,
                  float *acc, int64_t lda, const Epilogue &e, Prefetch pf) {
    constexpr int kR = rows_per_tile<kMB>();
    int64_t r = 0;
    for (; r + kR <= rows; r += kR)
        tile<kMB, kR>(x, ldx, w + r * ldw, ldw, pairs, acc + r * lda, lda, e.at_row(r), pf.at_row(r));
    if (r < rows)
        TileOfRows<kMB, kR - 1>::run(static_cast<int>(rows - r), x, ldx, w + r * ldw, ldw, pairs, acc + r * lda, lda,
                                     e.at_row(r), pf.at_row(r));
}

// Channel pairs [p0, p0 + pairs) of the expanded chunk (starting at pair p0 of x) for blocks
// [b0, b0 + nb) of x: blocks two at a time (one three when their count is odd). The first
// pass prefetches pf.
void chunk_blocks(const GemmBF16 &a, int64_t rows, int64_t p0, int64_t b0, int64_t nb, const uint32_t *w,
                  int64_t pairs, float *acc, int64_t lda, const Epilogue &e, Prefetch pf = {}) {
    for (int64_t j = 0; j < nb;) {
        const uint32_t *x = a.xp + p0 * a.mp + (b0 + j) * 16;
        float *c = acc + j * 16;
        const Prefetch first = j == 0 ? pf : Prefetch{};
        const Epilogue ej = e.at_block(b0 + j);
        const int64_t left = nb - j;
        if (left == 1) {
            panel_blocks<1>(rows, x, a.mp, w, kChunkK / 2, pairs, c, lda, ej, first);
            j += 1;
        } else if (left == 3) {
            panel_blocks<3>(rows, x, a.mp, w, kChunkK / 2, pairs, c, lda, ej, first);
            j += 3;
        } else {
            panel_blocks<2>(rows, x, a.mp, w, kChunkK / 2, pairs, c, lda, ej, first);
            j += 2;
        }
    }
}

void panel(const WeightView &w, const GemmBF16 &a, int64_t n0, int64_t rows, uint16_t *wbuf, float *acc) {
    static const float kOne = 1.f;
    const int64_t mblocks = a.mp / 16, gs = w.groups == 1 ? w.kp : w.group_size;
    const uint32_t *wp = reinterpret_cast<const uint32_t *>(wbuf);
    for (int64_t s0 = 0; s0 < mblocks; s0 += kSlabBlocks) {
        const int64_t nb = mblocks - s0 < kSlabBlocks ? mblocks - s0 : kSlabBlocks, lda = nb * 16;
        std::memset(acc, 0, sizeof(float) * static_cast<size_t>(rows * lda));
        for (int64_t k0 = 0; k0 < w.kp; k0 += kChunkK) {
            const int64_t kc = w.kp - k0 < kChunkK ? w.kp - k0 : kChunkK;
            Prefetch pf;
            if (k0 + kc < w.kp) {
                const int64_t next = k0 + kc, next_kc = w.kp - next < kChunkK ? w.kp - next : kChunkK;
                pf.base = w.qweight + n0 * w.row_bytes() + next * w.bits / 8;
                pf.stride = w.row_bytes();
                pf.lines = (next_kc * w.bits / 8 + 63) / 64;
            }
            if (!a.exact) {
                if (w.bits == 4) dequant_chunk<4>(w, n0, rows, k0, kc, wbuf, kChunkK);
                else dequant_chunk<8>(w, n0, rows, k0, kc, wbuf, kChunkK);
                chunk_blocks(a, rows, k0 / 2, s0, nb, wp, kc / 2, acc, lda, Epilogue{&kOne, 0}, pf);
                continue;
            }
            expand_chunk_exact(w, n0, rows, k0, kc, wbuf, kChunkK);
            // One pass per group within the chunk, its sums scaled by the group's scales; the
            // pass that starts a group also takes off its zero point (and the 128).
            for (int64_t k = k0; k < k0 + kc;) {
                const int64_t g = k / gs, end = (g + 1) * gs < k0 + kc ? (g + 1) * gs : k0 + kc;
                Epilogue e{w.scales + n0 * w.groups + g, w.groups};
                if (k == g * gs) {
                    e.zero = w.zeros + n0 * w.groups + g;
                    e.xsum = a.xsum + g * a.mp;
                }
                chunk_blocks(a, rows, k / 2, s0, nb, wp + (k - k0) / 2, (end - k) / 2, acc, lda, e,
                             k == k0 ? pf : Prefetch{});
                k = end;
            }
        }
        gemm::store_slab(a.out, a.ldo, a.m, n0, rows, s0, nb, acc);
    }
}

// Row r (of a panel starting at n0) of the tiled layout's unit u as four vectors of 32 16-bit
// words in channel order (channels 0-31, ..., 96-127), each code q with `high` as its high
// byte: 0x43 makes the bf16 word of 128 + q, 0 the index q. The row's next unit is asked for
// meanwhile.
inline void unit_words(const TiledInt4View &w, int64_t n0, int64_t r, int64_t u, __m512i high, __m512i words[4]) {
    const int64_t units = w.k / kTiledUnit, tile = n0 / kTiledRows + r / kTiledRows;
    const uint8_t *src = w.data + ((tile * units + u) * kTiledRows + r % kTiledRows) * 64;
    if (u + 1 < units) _mm_prefetch(reinterpret_cast<const char *>(src + kTiledRows * 64), _MM_HINT_T0);
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m512i v = _mm512_loadu_si512(src);
    const __m512i lo = _mm512_and_si512(v, mask);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
    words[0] = _mm512_unpacklo_epi8(lo, high);
    words[1] = _mm512_unpackhi_epi8(lo, high);
    words[2] = _mm512_unpacklo_epi8(hi, high);
    words[3] = _mm512_unpackhi_epi8(hi, high);
}

// Unit u of rows [n0, n0 + rows) (n0 a multiple of kTiledRows) as bf16 words 128 + q in
// channel order, row r at dst + r * ld.
void expand_tiled_unit(const TiledInt4View &w, int64_t n0, int64_t rows, int64_t u, uint16_t *dst, int64_t ld) {
    static_assert(kTiledUnit == kChunkK, "a chunk is one unit of the tiled layout");
    const __m512i high = _mm512_set1_epi8(0x43);
    for (int64_t r = 0; r < rows; ++r) {
        __m512i words[4];
        unit_words(w, n0, r, u, high, words);
        for (int b = 0; b < 4; ++b) _mm512_storeu_si512(dst + r * ld + b * kBlock, words[b]);
    }
}

// The same unit dequantized: each 32-channel block through a table of the 16 values of its
// group, bf16 of fp32(scale * (q + 128) - offset) (one rounding to fp32, then to bf16: the
// value scale * (q - zero), within an fp32 rounding of the offset); for groups of 32 or 64
// channels, where one exact pass per group would cost more than the rounding (tiled_exact()).
void dequant_tiled_unit(const TiledInt4View &w, int64_t n0, int64_t rows, int64_t u, uint16_t *dst, int64_t ld) {
    const __m512 code = _mm512_setr_ps(128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143);
    for (int64_t r = 0; r < rows; ++r) {
        __m512i idx[4];
        unit_words(w, n0, r, u, _mm512_setzero_si512(), idx);
        const int64_t tile = n0 / kTiledRows + r / kTiledRows;
        for (int b = 0; b < 4; ++b) {
            const int64_t g = (u * kTiledUnit + b * kBlock) / w.group_size;
            const int64_t at = (tile * w.groups + g) * kTiledRows + r % kTiledRows;
            const float s = _cvtsh_ss(w.scales[at]), offset = s * (_cvtsh_ss(w.zeros[at]) + 128.f);
            const __m512 value = _mm512_fmsub_ps(code, _mm512_set1_ps(s), _mm512_set1_ps(offset));
            const __m512i lut = _mm512_castsi256_si512(::ipex::kernels::avx512::fp32_to_bf16(value));
            _mm512_storeu_si512(dst + r * ld + b * kBlock, _mm512_permutexvar_epi16(idx[b], lut));
        }
    }
}

// Group g's scales and offsets scale * (zero + 128) of rows [n0, n0 + rows) side by side, in
// fp32 (rows of a tile lie together in the layout, tiles apart).
void gather_group(const TiledInt4View &w, int64_t n0, int64_t rows, int64_t g, float *scale, float *offset) {
    static_assert(kTiledRows == 8, "a tile's fp16 values are one 128-bit load");
    const int64_t t0 = n0 / kTiledRows;
    for (int64_t t = 0; t * kTiledRows < rows; ++t) {
        const int64_t at = ((t0 + t) * w.groups + g) * kTiledRows;
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w.scales + at)));
        const __m256 z = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w.zeros + at)));
        _mm256_storeu_ps(scale + t * kTiledRows, s);
        _mm256_storeu_ps(offset + t * kTiledRows, _mm256_mul_ps(s, _mm256_add_ps(z, _mm256_set1_ps(128.f))));
    }
}

void tiled_panel(const TiledInt4View &w, const GemmBF16 &a, int64_t n0, int64_t rows, uint16_t *wbuf, float *acc) {
    static const float kOne = 1.f;
    const int64_t mblocks = a.mp / 16, units = w.k / kTiledUnit, gs = w.group_size;
    const uint32_t *wp = reinterpret_cast<const uint32_t *>(wbuf);
    alignas(64) float scale[kPanelRows], offset[kPanelRows];
    for (int64_t s0 = 0; s0 < mblocks; s0 += kSlabBlocks) {
        const int64_t nb = mblocks - s0 < kSlabBlocks ? mblocks - s0 : kSlabBlocks, lda = nb * 16;
        std::memset(acc, 0, sizeof(float) * static_cast<size_t>(rows * lda));
        for (int64_t u = 0; u < units; ++u) {
            if (!tiled_exact(w)) {
                dequant_tiled_unit(w, n0, rows, u, wbuf, kChunkK);
                chunk_blocks(a, rows, u * kTiledUnit / 2, s0, nb, wp, kTiledUnit / 2, acc, lda, Epilogue{&kOne, 0});
                continue;
            }
            expand_tiled_unit(w, n0, rows, u, wbuf, kChunkK);
            // One pass per group within the unit, its sums scaled by the group's scales; the
            // pass that starts a group also takes off its offsets.
            const int64_t k0 = u * kTiledUnit;
            for (int64_t k = k0; k < k0 + kTiledUnit;) {
                const int64_t g = k / gs, end = (g + 1) * gs < k0 + kTiledUnit ? (g + 1) * gs : k0 + kTiledUnit;
                gather_group(w, n0, rows, g, scale, offset);
                Epilogue e{scale, 1};
                if (k == g * gs) {
                    e.offset = offset;
                    e.xsum = a.xsum + g * a.mp;
                }
                chunk_blocks(a, rows, k / 2, s0, nb, wp + (k - k0) / 2, (end - k) / 2, acc, lda, e);
                k = end;
            }
        }
        gemm::store_slab(a.out, a.ldo, a.m, n0, rows, s0, nb, acc);
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

void gemm_bf16_tiled_avx512(const TiledInt4View &w, const GemmBF16 &a, int64_t n_begin, int64_t n_end) {
    static_assert(kPanelRows % kTiledRows == 0, "panels of whole tiles");
    const Buffer wbuf(kPanelRows * kChunkK * 2);
    const Buffer acc(kPanelRows * kSlabBlocks * 16 * 4);
    for (int64_t n = n_begin; n < n_end; n += kPanelRows) {
        const int64_t rows = n_end - n < kPanelRows ? n_end - n : kPanelRows;
        tiled_panel(w, a, n, rows, wbuf.as<uint16_t>(), acc.as<float>());
    }
}

}  // namespace ipex::woq::kernels
