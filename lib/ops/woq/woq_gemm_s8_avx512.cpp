// Large-batch int8-activation kernel for the tiled int4 layout (AVX-512 VNNI): the W4A8 path of
// lowp_mode "int8". Built with the AVX-512 flags of woq_gemm_avx512.cpp; callers check
// isa::avx512_vnni() first. No libtorch or standard library header.
//
// Like the bf16 kernel, out^T = W x^T a panel of weight rows at a time, with 16 rows of x in
// a vector: x comes quantized and packed by channel quads ([k/4][mp] words of four bytes
// xq + 128), and each (weight row, quad) of the panel's expanded weights is a 32-bit broadcast
// operand of VPDPBUSD (unsigned x bytes times signed weight bytes) against those loads. The
// weights are expanded once per panel and call, all units at once (int8 q - z', z' the zero
// point rounded to an integer: 128 bytes a row and unit, a few hundred KiB a panel, in L2),
// together with what the epilogues need: the piece scales, the fractions z - z' and the sums
// of q - z' that take the 128 off. For a piece (min(group, unit) channels) of 16 rows of x
// and weight row n:
//   sum_k x_k w_nk = xscale * s * (sum_k (xq_k + 128)(q_k - z') - 128 sum_k (q_k - z')
//                                  - (z - z') sum_k xq_k)
// The int32 dot products are turned to fp32 once per piece (8 VPDPBUSD per conversion for
// groups of 32 channels), the scales of x once per unit.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx512/math.h"
#include "ops/woq/woq_gemm_avx512.h"
#include "ops/woq/woq_kernels.h"

namespace ipex::woq::kernels {
namespace {

constexpr int64_t kPanel = kGemmS8PanelRows;
constexpr int64_t kQuads = kTiledUnit / 4;  // channel quads per unit
// 16-row blocks of x per pass over a panel, as in the bf16 kernel.
constexpr int64_t kSlabBlocks = 8;
static_assert(kPanel % kTiledRows == 0, "panels of whole tiles");

// The panel's tables in the caller's scratch.
struct Tables {
    int8_t *w;    // [unit][kPanel rows][kTiledUnit] weights q - z'
    float *sw;    // [piece][kPanel] scales
    float *cz;    // [piece][kPanel] scale * (z - z')
    float *wc;    // [unit][kPanel] 128 * sum over the unit's pieces of scale * sum (q - z')
    float *acc;   // [kPanel][kSlabBlocks * 16]
};

inline int64_t round_up64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

Tables carve(void *scratch, int64_t k) {
    const int64_t units = k / kTiledUnit, pieces = k / 32;
    auto *p = static_cast<unsigned char *>(scratch);
    p += (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
    Tables t;
    t.w = reinterpret_cast<int8_t *>(p);
    p += round_up64(units * kPanel * kTiledUnit);
    t.sw = reinterpret_cast<float *>(p);
    p += round_up64(pieces * kPanel * 4);
    t.cz = reinterpret_cast<float *>(p);
    p += round_up64(pieces * kPanel * 4);
    t.wc = reinterpret_cast<float *>(p);
    p += round_up64(units * kPanel * 4);
    t.acc = reinterpret_cast<float *>(p);
    return t;
}

// z' for a piece with scale s and zero point z: z rounded to the nearest integer (ties to even),
// within -112..127 so that q - z' fits a signed byte; 0 for a zero scale (the piece is zero).
// What rounding or the bounds leave, s (z - z'), comes off through x's piece sums.
int integer_zero(float s, float z) {
    if (s == 0.f) return 0;
    const int r = _mm_cvtss_si32(_mm_set_ss(z));
    return r < -112 ? -112 : r > 127 ? 127 : r;
}

// Rows [n0, n0 + rows) of the layout, every unit: weights q - z' in channel order and the
// epilogue tables.
void expand_panel(const TiledInt4View &w, int64_t n0, int64_t rows, const Tables &t) {
    const int64_t units = w.k / kTiledUnit, ps = tiled_piece(w), per_unit = kTiledUnit / ps;
    const __m512i mask = _mm512_set1_epi8(0x0f);
    // Byte j of a unit holds channel 8 (j / 16) + j % 16 (j % 16 < 8) or 32 + ... (woq_kernels.h):
    // its 8-byte runs are channels 0-7, 32-39, 8-15, 40-47, ...; this puts them in order.
    const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t tile = n0 / kTiledRows + r / kTiledRows;
        for (int64_t u = 0; u < units; ++u) {
            const uint8_t *src = w.data + ((tile * units + u) * kTiledRows + r % kTiledRows) * 64;
            const __m512i v = _mm512_loadu_si512(src);
            const __m512i lo = _mm512_permutexvar_epi64(order, _mm512_and_si512(v, mask));
            const __m512i hi = _mm512_permutexvar_epi64(order, _mm512_and_si512(_mm512_srli_epi16(v, 4), mask));
            int z[4] = {0, 0, 0, 0};
            float s[4] = {0, 0, 0, 0};
            for (int64_t pc = 0; pc < per_unit; ++pc) {
                const int64_t piece = u * per_unit + pc, g = (u * kTiledUnit + pc * ps) / w.group_size;
                const int64_t at = (tile * w.groups + g) * kTiledRows + r % kTiledRows;
                s[pc] = _cvtsh_ss(w.scales[at]);
                const float zf = _cvtsh_ss(w.zeros[at]);
                z[pc] = integer_zero(s[pc], zf);
                t.sw[piece * kPanel + r] = s[pc];
                t.cz[piece * kPanel + r] = w.integer_zeros ? 0.f : s[pc] * (zf - static_cast<float>(z[pc]));
            }
            __m512i zlo, zhi;
            if (per_unit == 1) {
                zlo = zhi = _mm512_set1_epi8(static_cast<char>(z[0]));
            } else if (per_unit == 2) {
                zlo = _mm512_set1_epi8(static_cast<char>(z[0]));
                zhi = _mm512_set1_epi8(static_cast<char>(z[1]));
            } else {
                zlo = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(z[0])),
                                         _mm256_set1_epi8(static_cast<char>(z[1])), 1);
                zhi = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(z[2])),
                                         _mm256_set1_epi8(static_cast<char>(z[3])), 1);
            }
            int8_t *dst = t.w + (u * kPanel + r) * kTiledUnit;
            _mm512_storeu_si512(dst, _mm512_sub_epi8(lo, zlo));
            _mm512_storeu_si512(dst + 64, _mm512_sub_epi8(hi, zhi));
            // Sums of q per 8 channels, then per piece.
            alignas(64) int64_t sums[16];
            _mm512_store_si512(sums, _mm512_sad_epu8(lo, _mm512_setzero_si512()));
            _mm512_store_si512(sums + 8, _mm512_sad_epu8(hi, _mm512_setzero_si512()));
            const int64_t runs = 16 / per_unit;
            float wc = 0.f;
            for (int64_t pc = 0; pc < per_unit; ++pc) {
                int64_t q = 0;
                for (int64_t i = 0; i < runs; ++i) q += sums[pc * runs + i];
                wc += s[pc] * static_cast<float>(q - ps * z[pc]);
            }
            t.wc[u * kPanel + r] = 128.f * wc;
        }
    }
}

// One unit of the panel against blocks of 16 rows of x (pointers at weight row 0, block 0).
struct UnitArgs {
    const uint32_t *x;    // quad p of the unit at x + p * mp
    int64_t mp;
    const uint32_t *w;    // weight row r's quads at w + r * kQuads
    const float *sw, *cz; // piece pc of the unit, row r at [pc * kPanel + r]
    const float *xsum;    // piece pc at xsum + pc * mp
    const float *xscale;
    const float *wc;      // row r
    float *acc;
    int64_t lda;
    UnitArgs at_row(int64_t r) const {
        UnitArgs a = *this;
        a.w += r * kQuads;
        a.sw += r;
        a.cz += r;
        a.wc += r;
        a.acc += r * lda;
        return a;
    }
    UnitArgs at_block(int64_t j) const {
        UnitArgs a = *this;
        a.x += 16 * j;
        a.xsum += 16 * j;
        a.xscale += 16 * j;
        a.acc += 16 * j;
        return a;
    }
};

// d += the dot products of x's unsigned bytes with the signed bytes of the 32-bit word at w,
// broadcast. In assembly: with the intrinsic in these register tiles GCC 12 copied every
// accumulator twice per step instead of updating it in place.
inline __m512i dpbusd_broadcast(__m512i d, __m512i x, const uint32_t *w) {
    asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(d) : "v"(x), "m"(*w));
    return d;
}

// acc[r][16 j + i] += the unit's share for kR weight rows and kMB blocks of x.
template <int kPieces, bool kFrac, int kMB, int kR>
void tile(const UnitArgs &a) {
    constexpr int kQ = static_cast<int>(kQuads) / kPieces;
    __m512 f[kR][kMB];
    #pragma GCC unroll 4
    for (int pc = 0; pc < kPieces; ++pc) {
        __m512i d[kR][kMB];
        #pragma GCC unroll 32
        for (int r = 0; r < kR; ++r)
            #pragma GCC unroll 32
            for (int j = 0; j < kMB; ++j) d[r][j] = _mm512_setzero_si512();
        const uint32_t *x = a.x + pc * kQ * a.mp, *w = a.w + pc * kQ;
        #pragma GCC unroll 4
        for (int p = 0; p < kQ; ++p) {
            __m512i xv[kMB];
            #pragma GCC unroll 32
            for (int j = 0; j < kMB; ++j) xv[j] = _mm512_loadu_si512(x + p * a.mp + 16 * j);
            #pragma GCC unroll 32
            for (int r = 0; r < kR; ++r)
                #pragma GCC unroll 32
                for (int j = 0; j < kMB; ++j) d[r][j] = dpbusd_broadcast(d[r][j], xv[j], w + r * kQuads + p);
        }
        #pragma GCC unroll 32
        for (int r = 0; r < kR; ++r) {
            const __m512 s = _mm512_set1_ps(a.sw[pc * kPanel + r]);
            #pragma GCC unroll 32
            for (int j = 0; j < kMB; ++j) {
                const __m512 v = _mm512_cvtepi32_ps(d[r][j]);
                f[r][j] = pc == 0 ? _mm512_mul_ps(v, s) : _mm512_fmadd_ps(v, s, f[r][j]);
            }
        }
        if constexpr (kFrac) {
            __m512 xs[kMB];
            #pragma GCC unroll 32
            for (int j = 0; j < kMB; ++j) xs[j] = _mm512_loadu_ps(a.xsum + pc * a.mp + 16 * j);
            #pragma GCC unroll 32
            for (int r = 0; r < kR; ++r) {
                const __m512 c = _mm512_set1_ps(a.cz[pc * kPanel + r]);
                #pragma GCC unroll 32
                for (int j = 0; j < kMB; ++j) f[r][j] = _mm512_fnmadd_ps(c, xs[j], f[r][j]);
            }
        }
    }
    __m512 xa[kMB];
    #pragma GCC unroll 32
    for (int j = 0; j < kMB; ++j) xa[j] = _mm512_loadu_ps(a.xscale + 16 * j);
    #pragma GCC unroll 32
    for (int r = 0; r < kR; ++r) {
        const __m512 wc = _mm512_set1_ps(a.wc[r]);
        #pragma GCC unroll 32
        for (int j = 0; j < kMB; ++j) {
            float *dst = a.acc + r * a.lda + 16 * j;
            _mm512_storeu_ps(dst, _mm512_fmadd_ps(_mm512_sub_ps(f[r][j], wc), xa[j], _mm512_loadu_ps(dst)));
        }
    }
}

// Weight rows per tile for kMB blocks of x: two sets of accumulators (int32 per piece, fp32 per
// unit) and the x registers within the 32; 48 rows a panel are whole tiles for each.
template <int kMB>
constexpr int rows_per_tile() {
    return kMB == 1 ? 12 : kMB == 2 ? 6 : 4;
}

// tile<..., rows> for a run-time rows <= kR. (woq_gemm_avx512.cpp has the same dispatch for its
// tiles; one shared through generic lambdas measured 3-5% slower here with GCC 12.)
template <int kPieces, bool kFrac, int kMB, int kR>
struct TileOfRows {
    static void run(int rows, const UnitArgs &a) {
        if (rows == kR) tile<kPieces, kFrac, kMB, kR>(a);
        else TileOfRows<kPieces, kFrac, kMB, kR - 1>::run(rows, a);
    }
};
template <int kPieces, bool kFrac, int kMB>
struct TileOfRows<kPieces, kFrac, kMB, 0> {
    static void run(int, const UnitArgs &) {}
};

template <int kPieces, bool kFrac, int kMB>
void panel_blocks(int64_t rows, const UnitArgs &a) {
    constexpr int kR = rows_per_tile<kMB>();
    int64_t r = 0;
    for (; r + kR <= rows; r += kR) tile<kPieces, kFrac, kMB, kR>(a.at_row(r));
    if (r < rows) TileOfRows<kPieces, kFrac, kMB, kR - 1>::run(static_cast<int>(rows - r), a.at_row(r));
}

template <int kPieces, bool kFrac>
void panel(const TiledInt4View &w, const GemmS8Tiled &a, int64_t n0, int64_t rows, const Tables &t) {
    expand_panel(w, n0, rows, t);
    const int64_t units = w.k / kTiledUnit, mblocks = a.mp / 16;
    for (int64_t s0 = 0; s0 < mblocks; s0 += kSlabBlocks) {
        const int64_t nb = mblocks - s0 < kSlabBlocks ? mblocks - s0 : kSlabBlocks, lda = nb * 16;
        std::memset(t.acc, 0, sizeof(float) * static_cast<size_t>(rows * lda));
        for (int64_t u = 0; u < units; ++u) {
            const UnitArgs ua{a.xq + u * kQuads * a.mp + s0 * 16,
                              a.mp,
                              reinterpret_cast<const uint32_t *>(t.w + u * kPanel * kTiledUnit),
                              t.sw + u * kPieces * kPanel,
                              t.cz + u * kPieces * kPanel,
                              a.xsum + u * kPieces * a.mp + s0 * 16,
                              a.xscale + u * a.mp + s0 * 16,
                              t.wc + u * kPanel,
                              t.acc,
                              lda};
            // Blocks two at a time (one three when their count is odd).
            for (int64_t j = 0; j < nb;) {
                const int64_t left = nb - j;
                if (left == 1) {
                    panel_blocks<kPieces, kFrac, 1>(rows, ua.at_block(j));
                    j += 1;
                } else if (left == 3) {
                    panel_blocks<kPieces, kFrac, 3>(rows, ua.at_block(j));
                    j += 3;
                } else {
                    panel_blocks<kPieces, kFrac, 2>(rows, ua.at_block(j));
                    j += 2;
                }
            }
        }
        gemm::store_slab(a.out, a.ldo, a.m, n0, rows, s0, nb, t.acc);
    }
}

template <int kPieces>
void panel_of(const TiledInt4View &w, const GemmS8Tiled &a, int64_t n0, int64_t rows, const Tables &t) {
    if (w.integer_zeros) panel<kPieces, false>(w, a, n0, rows, t);
    else panel<kPieces, true>(w, a, n0, rows, t);
}

}  // namespace

int64_t gemm_s8_tiled_scratch_bytes(int64_t k) {
    const int64_t units = k / kTiledUnit, pieces = k / 32;
    return 64 + round_up64(units * kPanel * kTiledUnit) + 2 * round_up64(pieces * kPanel * 4) +
           round_up64(units * kPanel * 4) + kPanel * kSlabBlocks * 16 * 4;
}

void gemm_s8_tiled_avx512vnni(const TiledInt4View &w, const GemmS8Tiled &a, int64_t n_begin, int64_t n_end,
                              void *scratch) {
    const Tables t = carve(scratch, w.k);
    const int64_t per_unit = kTiledUnit / tiled_piece(w);
    for (int64_t n = n_begin; n < n_end; n += kPanel) {
        const int64_t rows = n_end - n < kPanel ? n_end - n : kPanel;
        if (per_unit == 4) panel_of<4>(w, a, n, rows, t);
        else if (per_unit == 2) panel_of<2>(w, a, n, rows, t);
        else panel_of<1>(w, a, n, rows, t);
    }
}

void quantize_tiled_s8_avx512(const QuantizeTiledS8 &q, int64_t b0, int64_t b1) {
    const int64_t units = q.k / kTiledUnit, per_unit = kTiledUnit / q.piece, per_piece = 8 / per_unit;
    alignas(64) uint32_t block[16][kQuads];
    for (int64_t b = b0; b < b1; ++b)
        for (int64_t u = 0; u < units; ++u) {
            for (int64_t i = 0; i < 16; ++i) {
                const int64_t row = b * 16 + i;
                float *xscale = q.xscale + u * q.mp + row, *xsum = q.xsum + u * per_unit * q.mp + row;
                if (row >= q.m) {
                    std::memset(block[i], 0x80, sizeof(block[i]));
                    *xscale = 0.f;
                    if (q.sums)
                        for (int64_t pc = 0; pc < per_unit; ++pc) xsum[pc * q.mp] = 0.f;
                    continue;
                }
                __m512 v[8];
                for (int c = 0; c < 8; ++c) {
                    const int64_t at = row * q.k + u * kTiledUnit + 16 * c;
                    v[c] = q.xf ? _mm512_loadu_ps(q.xf + at)
                                : ::ipex::kernels::avx512::bf16_to_fp32(
                                      _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q.xb + at)));
                }
                __m512 m = _mm512_abs_ps(v[0]);
                for (int c = 1; c < 8; ++c) m = _mm512_max_ps(m, _mm512_abs_ps(v[c]));
                const float amax = _mm512_reduce_max_ps(m);
                const __m512 inv = _mm512_set1_ps(amax == 0.f ? 0.f : 127.f / amax);
                // A NaN in the unit makes its scale NaN, so that it reaches the row's outputs (the
                // maximum above may pass over it).
                __mmask16 nan = 0;
                for (int c = 0; c < 8; ++c) nan |= _mm512_cmp_ps_mask(v[c], v[c], _CMP_UNORD_Q);
                *xscale = nan ? __builtin_nanf("") : amax / 127.f;
                __m512i xq[8];
                for (int c = 0; c < 8; ++c) xq[c] = _mm512_cvtps_epi32(_mm512_mul_ps(v[c], inv));
                for (int64_t pc = 0; pc < per_unit && q.sums; ++pc) {
                    __m512i s = xq[pc * per_piece];
                    for (int64_t c = 1; c < per_piece; ++c) s = _mm512_add_epi32(s, xq[pc * per_piece + c]);
                    xsum[pc * q.mp] = static_cast<float>(_mm512_reduce_add_epi32(s));
                }
                auto *bytes = reinterpret_cast<unsigned char *>(block[i]);
                for (int c = 0; c < 8; ++c)
                    _mm_store_si128(reinterpret_cast<__m128i *>(bytes + 16 * c),
                                    _mm512_cvtepi32_epi8(_mm512_add_epi32(xq[c], _mm512_set1_epi32(128))));
            }
            // Quad p of the 16 rows side by side: two 16 x 16 transposes of 32-bit words.
            for (int h = 0; h < 2; ++h) {
                __m512 t[16];
                for (int i = 0; i < 16; ++i) t[i] = _mm512_castsi512_ps(_mm512_load_si512(block[i] + 16 * h));
                ::ipex::kernels::avx512::transpose16x16(t);
                for (int p = 0; p < 16; ++p)
                    _mm512_storeu_si512(q.xq + (u * kQuads + 16 * h + p) * q.mp + b * 16, _mm512_castps_si512(t[p]));
            }
        }
}

}  // namespace ipex::woq::kernels
