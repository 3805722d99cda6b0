// AVX-512 body of the blocked attention kernel (attention_kernel.h). Built with the ISA flags
// and called only after attention_kernel::available().
//
// Layouts, per thread (packed once per batch entry it works on):
//   bf16: K as pairs of head-dim elements, [d/2][keys] 32-bit words (the B operand of Q·Kᵀ);
//         V as pairs of key rows, [keys/2][dv] words (the B operand of P·V); Q and P rows as
//         bf16 with the pairs adjacent (the A operands). VDPBF16PS sums each pair in fp32.
//   fp32: K transposed [d][keys], V [keys][dv], Q and P rows as they are; FMA.
// Widths are padded with zeros to whole vectors, so loads of packed data need no masks.
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/attention_kernel.h"
#include "kernels/avx512/math.h"
#include "kernels/avx512/online_softmax.h"

namespace ipex::ops::attention_kernel {
namespace {

using ::ipex::kernels::avx512::fp32_to_bf16;
using ::ipex::kernels::avx512::online_softmax_block;
using ::ipex::kernels::avx512::store_bf16;
using ::ipex::kernels::avx512::tail_mask;

// This file's AVX-512 flags must not reach inline functions other files share (the linker
// keeps one copy of each): no std::vector, std::fill, std::min/max here, but these helpers
// of internal linkage.
template <class T>
T lesser(T a, T b) { return b < a ? b : a; }
template <class T>
T greater(T a, T b) { return a < b ? b : a; }
template <class T>
void fill(T *begin, T *end, T value) {
    for (; begin != end; ++begin) *begin = value;
}

// A zero-initialized array of n elements.
template <class T>
class Buffer {
public:
    Buffer() = default;
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    ~Buffer() { delete[] data_; }
    void assign(int64_t n, T value) {
        delete[] data_;
        data_ = new T[static_cast<size_t>(n)];
        fill(data_, data_ + n, value);
    }
    T *data() { return data_; }
    T *begin() { return data_; }
    T &operator[](int64_t i) { return data_[i]; }

private:
    T *data_ = nullptr;
};

constexpr int64_t kRowBlock = 64;  // query rows per task
constexpr int64_t kKeyBlock = 256;  // keys per step of the online softmax
constexpr int kTileRows = 8;       // rows of a register tile (x 32 columns)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// A skipped block's scores reach the result only through exp(score - row max); below this
// distance the fp32 exponential is 0.
constexpr float kVanishes = 110.f;
// Bias entries at or below this (-inf, finfo.min, -1e30 masks) hide their score.
constexpr float kHidingBias = -1e30f;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// C[M x 16 NV] (+)= A[M x k] B[k x 16 NV]: bf16 pairs (A rows of `lda` words, B [k/2][ldb]
// words) or fp32 (A rows of `lda` floats, B [k][ldb]). `steps` counts words (pairs) for
// bf16 and floats for fp32. `last` masks the columns of the last vector.
template <bool BF16, int M, int NV>
void tile(const void *a, int64_t lda, const void *b, int64_t ldb, int64_t steps, float *c, int64_t ldc,
          bool accumulate, __mmask16 last) {
    __m512 acc[M][NV];
    for (int r = 0; r < M; ++r)
        for (int v = 0; v < NV; ++v)
            acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(v == NV - 1 ? last : 0xffff, c + r * ldc + 16 * v)
                                   : _mm512_setzero_ps();
    if constexpr (BF16) {
        const auto *aw = static_cast<const uint32_t *>(a);
        const auto *bw = static_cast<const uint32_t *>(b);
        for (int64_t p = 0; p < steps; ++p) {
            __m512i bv[NV];
            for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_si512(bw + p * ldb + 16 * v);
            for (int r = 0; r < M; ++r) {
                const __m512i av = _mm512_set1_epi32(static_cast<int>(aw[r * lda + p]));
                for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)av, (__m512bh)bv[v]);
            }
        }
    } else {
        const auto *af = static_cast<const float *>(a);
        const auto *bf = static_cast<const float *>(b);
        for (int64_t p = 0; p < steps; ++p) {
            __m512 bv[NV];
            for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(bf + p * ldb + 16 * v);
            for (int r = 0; r < M; ++r) {
                const __m512 av = _mm512_set1_ps(af[r * lda + p]);
                for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
            }
        }
    }
    for (int r = 0; r < M; ++r)
        for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, v == NV - 1 ? last : 0xffff, acc[r][v]);
}

template <bool BF16, int M>
void tile_rows(const void *a, int64_t lda, const void *b, int64_t ldb, int64_t steps, float *c, int64_t ldc,
               int64_t cols, bool accumulate) {
    const size_t unit = BF16 ? 4 : 4;  // a word of two bf16, or a float
    const auto *bb = static_cast<const char *>(b);
    int64_t n = 0;
    for (; n + 32 <= cols; n += 32)
        tile<BF16, M, 2>(a, lda, bb + n * unit, ldb, steps, c + n, ldc, accumulate, 0xffff);
    if (n < cols) {
        if (cols - n > 16)
            tile<BF16, M, 2>(a, lda, bb + n * unit, ldb, steps, c + n, ldc, accumulate, tail_mask(cols - n - 16));
        else
            tile<BF16, M, 1>(a, lda, bb + n * unit, ldb, steps, c + n, ldc, accumulate, tail_mask(cols - n));
    }
}

// C[rows x cols] (+)= A B, in register tiles of up to kTileRows rows.
template <bool BF16>
void gemm(const void *a, int64_t lda, const void *b, int64_t ldb, int64_t steps, float *c, int64_t ldc, int64_t rows,
          int64_t cols, bool accumulate) {
    const auto *aa = static_cast<const char *>(a);
    for (int64_t r = 0; r < rows; r += kTileRows) {
        const void *ar = aa + r * lda * 4;
        float *cr = c + r * ldc;
        switch (lesser<int64_t>(kTileRows, rows - r)) {
            case 8: tile_rows<BF16, 8>(ar, lda, b, ldb, steps, cr, ldc, cols, accumulate); break;
            case 7: tile_rows<BF16, 7>(ar, lda, b, ldb, steps, cr, ldc, cols, accumulate); break;
            case 6: tile_rows<BF16, 6>(ar, lda, b, ldb, steps, cr, ldc, cols, accumulate); break;
            case 5: tile_rows<BF16, 5>(ar, lda, b, ldb, steps, cr, ldc, cols, accumulate); break;
            case 4: tile_rows<BF16, 4>(ar, lda, b, ldb, steps, cr, ldc, cols, accumulate); break;
            case 3: tile_rows<BF16, 3>(ar, lda, b, ldb, steps, cr, ldc, cols, accumulate); break;
            case 2: tile_rows<BF16, 2>(ar, lda, b, ldb, steps, cr, ldc, cols, accumulate); break;
            default: tile_rows<BF16, 1>(ar, lda, b, ldb, steps, cr, ldc, cols, accumulate); break;
        }
    }
}

template <class T>
const T *element(const Operand &o, int64_t b, int64_t i, int64_t j) {
    return static_cast<const T *>(o.data) + o.offset[b] + i * o.row + j * o.col;
}

// Per-thread buffers, sized once per problem.
template <bool BF16>
struct Workspace {
    using Elem = std::conditional_t<BF16, uint16_t, float>;
    int64_t dp = 0, kp = 0, lkp = 0, dvp = 0, packed_batch = -1;
    Buffer<uint32_t> kw, vw;  // bf16 packed K / V words
    Buffer<float> kf, vf;     // fp32 packed K / V
    Buffer<Elem> qbuf, pbuf;  // A operands: Q rows, P rows
    Buffer<float> s, o, row_max, row_sum, skipped;
    Buffer<float> bias_row;
    Buffer<uint8_t> mask_row;

    explicit Workspace(const Problem &p) {
        dp = BF16 ? round_up(p.d, 2) : p.d;
        kp = round_up(kKeyBlock, 2);
        lkp = round_up(p.lk, 32);
        dvp = round_up(p.dv, 32);
        if (BF16) {
            kw.assign(dp / 2 * lkp, 0);
            vw.assign(round_up(p.lk, 2) / 2 * dvp, 0);
        } else {
            kf.assign(p.d * lkp, 0.f);
            vf.assign(p.lk * dvp, 0.f);
        }
        qbuf.assign(kRowBlock * dp, 0);
        pbuf.assign(kRowBlock * kp, 0);
        s.assign(kRowBlock * kKeyBlock, 0.f);
        o.assign(kRowBlock * dvp, 0.f);
        row_max.assign(kRowBlock, 0.f);
        row_sum.assign(kRowBlock, 0.f);
        skipped.assign(kRowBlock, 0.f);
        bias_row.assign(kKeyBlock, 0.f);
        mask_row.assign(kKeyBlock, 0);
    }
};

template <bool BF16>
void pack_kv(const Problem &p, int64_t b, Workspace<BF16> &w) {
    if (w.packed_batch == b) return;
    w.packed_batch = b;
    if constexpr (BF16) {
        for (int64_t j = 0; j < p.lk; ++j) {
            const uint16_t *row = element<uint16_t>(p.k, b, j, 0);
            for (int64_t e = 0; e < p.d; e += 2) {
                const uint32_t lo = row[e * p.k.col];
                const uint32_t hi = e + 1 < p.d ? row[(e + 1) * p.k.col] : 0u;
                w.kw[e / 2 * w.lkp + j] = lo | hi << 16;
            }
        }
        for (int64_t j = 0; j < p.lk; j += 2) {
            const uint16_t *r0 = element<uint16_t>(p.v, b, j, 0);
            const uint16_t *r1 = j + 1 < p.lk ? element<uint16_t>(p.v, b, j + 1, 0) : nullptr;
            uint32_t *dst = w.vw.data() + j / 2 * w.dvp;
            int64_t c = 0;
            if (p.v.col == 1 && r1) {
                for (; c + 16 <= p.dv; c += 16) {
                    const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(r0 + c)));
                    const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(r1 + c)));
                    _mm512_storeu_si512(dst + c, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
                }
            }
            for (; c < p.dv; ++c) {
                const uint32_t lo = r0[c * p.v.col];
                const uint32_t hi = r1 ? r1[c * p.v.col] : 0u;
                dst[c] = lo | hi << 16;
            }
        }
    } else {
        for (int64_t j = 0; j < p.lk; ++j) {
            const float *row = element<float>(p.k, b, j, 0);
            for (int64_t e = 0; e < p.d; ++e) w.kf[e * w.lkp + j] = row[e * p.k.col];
        }
        for (int64_t j = 0; j < p.lk; ++j) {
            const float *row = element<float>(p.v, b, j, 0);
            float *dst = w.vf.data() + j * w.dvp;
            if (p.v.col == 1) {
                std::memcpy(dst, row, p.dv * sizeof(float));
            } else {
                for (int64_t c = 0; c < p.dv; ++c) dst[c] = row[c * p.v.col];
            }
        }
    }
}

// Scores of row i (query index qi) for keys j0 .. j0 + n: scale, mask, bias, causal limit;
// returns the row max.
template <bool BF16>
float prepare_scores(const Problem &p, int64_t b, int64_t qi, int64_t j0, int64_t n, float *s, Workspace<BF16> &w) {
    const __m512 scale = _mm512_set1_ps(p.scale);
    const float *bias = nullptr;
    if (p.bias.data) {
        if (p.bias.col == 1) {
            bias = element<float>(p.bias, b, qi, j0);
        } else {
            const float *row = element<float>(p.bias, b, qi, j0);
            for (int64_t j = 0; j < n; ++j) w.bias_row[j] = row[j * p.bias.col];
            bias = w.bias_row.data();
        }
    }
    const uint8_t *mask = nullptr;
    if (p.mask.data) {
        const uint8_t *row = element<uint8_t>(p.mask, b, qi, j0);
        if (p.mask.col == 1) {
            mask = row;
        } else {
            for (int64_t j = 0; j < n; ++j) w.mask_row[j] = row[j * p.mask.col];
            mask = w.mask_row.data();
        }
    }
    const int64_t limit = p.causal ? lesser<int64_t>(n, qi + p.lk - p.lq - j0 + 1) : n;  // keys < limit seen
    __m512 mx = _mm512_set1_ps(kNegInf);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 m = tail_mask(n - j);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), scale);
        if (mask) {
            const __m128i bytes = _mm_maskz_loadu_epi8(m, mask + j);
            __mmask16 set = _mm_test_epi8_mask(bytes, bytes);
            if (p.mask_keeps) set = static_cast<__mmask16>(~set & m);
            x = _mm512_mask_mov_ps(x, set, _mm512_set1_ps(p.fill));
        }
        if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + j));
        if (limit < j + 16) {
            const __mmask16 hidden = limit <= j ? __mmask16(0xffff) : static_cast<__mmask16>(~tail_mask(limit - j));
            x = _mm512_mask_mov_ps(x, hidden, _mm512_set1_ps(kNegInf));
        }
        _mm512_mask_storeu_ps(s + j, m, x);
        mx = _mm512_mask_max_ps(mx, m, mx, x);
    }
    return _mm512_reduce_max_ps(mx);
}

// Whether every score of rows [i0, i0 + rows) x keys [j0, j0 + n) is hidden: all masked
// (no bias), or all biased below kHidingBias (no mask). *value bounds the hidden scores.
bool block_hidden(const Problem &p, int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t n, float *value) {
    if (p.mask.data && !p.bias.data) {
        for (int64_t i = i0; i < i0 + rows; ++i) {
            const uint8_t *row = element<uint8_t>(p.mask, b, i, j0);
            for (int64_t j = 0; j < n; ++j)
                if ((row[j * p.mask.col] != 0) == p.mask_keeps) return false;
        }
        *value = p.fill;
        return true;
    }
    if (p.bias.data && !p.mask.data) {
        float most = kNegInf;
        for (int64_t i = i0; i < i0 + rows; ++i) {
            const float *row = element<float>(p.bias, b, i, j0);
            for (int64_t j = 0; j < n; ++j) {
                const float x = row[j * p.bias.col];
                if (!(x <= kHidingBias)) return false;
                most = greater(most, x);
            }
        }
        *value = most;
        return true;
    }
    return false;
}

// Whether the hidden scores of a row (at most `hidden`) vanish next to its max.
bool hidden_vanish(const Problem &p, float hidden, float max) {
    if (hidden == kNegInf) return true;
    if (max == kNegInf) return false;
    if (p.bias.data) return hidden <= kHidingBias && max > kHidingBias / 10;  // the skipped q·k were not added
    return hidden - max < -kVanishes;
}

template <bool BF16>
bool row_block(const Problem &p, int64_t b, int64_t i0, int64_t rows, bool allow_skip, Workspace<BF16> &w) {
    using Elem = typename Workspace<BF16>::Elem;
    // Q rows into the A buffer (pairs zero-padded for an odd head dim).
    for (int64_t r = 0; r < rows; ++r) {
        const Elem *src = element<Elem>(p.q, b, i0 + r, 0);
        Elem *dst = w.qbuf.data() + r * w.dp;
        if (p.q.col == 1) {
            std::memcpy(dst, src, p.d * sizeof(Elem));
        } else {
            for (int64_t e = 0; e < p.d; ++e) dst[e] = src[e * p.q.col];
        }
    }
    fill(w.o.begin(), w.o.begin() + rows * w.dvp, 0.f);
    fill(w.row_max.begin(), w.row_max.begin() + rows, kNegInf);
    fill(w.row_sum.begin(), w.row_sum.begin() + rows, 0.f);
    fill(w.skipped.begin(), w.skipped.begin() + rows, kNegInf);
    const int64_t last_seen = p.causal ? i0 + rows - 1 + p.lk - p.lq : p.lk - 1;  // no key past it is seen
    for (int64_t j0 = 0; j0 < p.lk && j0 <= last_seen; j0 += kKeyBlock) {
        const int64_t n = lesser(kKeyBlock, p.lk - j0);
        float hidden = kNegInf;
        if (allow_skip && block_hidden(p, b, i0, rows, j0, n, &hidden)) {
            for (int64_t r = 0; r < rows; ++r) w.skipped[r] = greater(w.skipped[r], hidden);
            continue;
        }
        if constexpr (BF16) {
            gemm<true>(w.qbuf.data(), w.dp / 2, w.kw.data() + j0, w.lkp, w.dp / 2, w.s.data(), kKeyBlock, rows, n, false);
        } else {
            gemm<false>(w.qbuf.data(), w.dp, w.kf.data() + j0, w.lkp, p.d, w.s.data(), kKeyBlock, rows, n, false);
        }
        for (int64_t r = 0; r < rows; ++r) {
            float *s = w.s.data() + r * kKeyBlock;
            const float block_max = prepare_scores<BF16>(p, b, i0 + r, j0, n, s, w);
            Elem *prow = w.pbuf.data() + r * w.kp;
            online_softmax_block(s, n, block_max, &w.row_max[r], &w.row_sum[r], w.o.data() + r * w.dvp, w.dvp, w.kp,
                                 [prow](int64_t j, __m512 e) {
                                     if constexpr (BF16) {
                                         _mm256_storeu_si256(reinterpret_cast<__m256i *>(prow + j), fp32_to_bf16(e));
                                     } else {
                                         _mm512_storeu_ps(prow + j, e);
                                     }
                                 });
        }
        if constexpr (BF16) {
            gemm<true>(w.pbuf.data(), w.kp / 2, w.vw.data() + j0 / 2 * w.dvp, w.dvp, (n + 1) / 2, w.o.data(), w.dvp,
                       rows, p.dv, true);
        } else {
            gemm<false>(w.pbuf.data(), w.kp, w.vf.data() + j0 * w.dvp, w.dvp, n, w.o.data(), w.dvp, rows, p.dv, true);
        }
    }
    for (int64_t r = 0; r < rows; ++r)
        if (!hidden_vanish(p, w.skipped[r], w.row_max[r])) return false;
    for (int64_t r = 0; r < rows; ++r) {
        const float *orow = w.o.data() + r * w.dvp;
        const __m512 inv = _mm512_set1_ps(1.f / w.row_sum[r]);  // 0 / 0 = NaN for a row with no score, as softmax gives
        Elem *dst = static_cast<Elem *>(p.out) + p.out_offset[b] + (i0 + r) * p.out_row;
        for (int64_t c = 0; c < p.dv; c += 16) {
            const __mmask16 m = tail_mask(p.dv - c);
            const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, orow + c), inv);
            if constexpr (BF16) {
                store_bf16(dst + c, m, x);
            } else {
                _mm512_mask_storeu_ps(dst + c, m, x);
            }
        }
    }
    return true;
}

template <bool BF16>
void run_typed(const Problem &p) {
    const int64_t blocks = (p.lq + kRowBlock - 1) / kRowBlock;
    at::parallel_for(0, p.batch * blocks, 1, [&](int64_t begin, int64_t end) {
        Workspace<BF16> w(p);
        for (int64_t task = begin; task < end; ++task) {
            const int64_t b = task / blocks, i0 = task % blocks * kRowBlock;
            const int64_t rows = lesser(kRowBlock, p.lq - i0);
            pack_kv<BF16>(p, b, w);
            if (!row_block<BF16>(p, b, i0, rows, true, w)) row_block<BF16>(p, b, i0, rows, false, w);
        }
    });
}

}  // namespace

void run(const Problem &p) {
    if (p.batch == 0 || p.lq == 0) return;
    if (p.bf16) {
        run_typed<true>(p);
    } else {
        run_typed<false>(p);
    }
}

}  // namespace ipex::ops::attention_kernel
