// AVX-512 blocks of attention (kernels.h). Built with the ISA flags; called only after
// avx512_ok(). qk: 16 key positions per vector, one accumulator per query row (up to 8), the
// K^T row converted once and shared by the rows (grouped-query heads read K once). pv: up to 8
// rows x 32 channels of output in registers, each V row converted once per 32 channels.
#include <immintrin.h>

#include <algorithm>

#include "llm/kernels.h"
#include "kernels/avx512/math.h"
#include "kernels/avx512/online_softmax.h"

namespace ipex::llm::kernels {
namespace {

using ::ipex::kernels::avx512::exp16;
using ::ipex::kernels::avx512::tail_mask;

constexpr int kRows = 8;

template <bool BF16>
inline __m512 load16(const void *base, int64_t index, __mmask16 mask) {
    if constexpr (BF16) {
        return ::ipex::kernels::avx512::load_bf16(static_cast<const uint16_t *>(base) + index, mask);
    } else {
        return _mm512_maskz_loadu_ps(mask, static_cast<const float *>(base) + index);
    }
}

template <int R, bool BF16>
void qk_tile(const float *q, int64_t ldq, const void *kt, int64_t ldk, int64_t t0, int64_t t1, int64_t hd, float *s,
             int64_t lds) {
    for (int64_t t = t0; t < t1; t += 16) {
        const int64_t n = std::min<int64_t>(16, t1 - t);
        const __mmask16 mask = tail_mask(n);
        __m512 acc[R];
        for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t d = 0; d < hd; ++d) {
            const __m512 k = load16<BF16>(kt, d * ldk + t, mask);
            for (int i = 0; i < R; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i * ldq + d]), k, acc[i]);
        }
        for (int i = 0; i < R; ++i) _mm512_mask_storeu_ps(s + i * lds + (t - t0), mask, acc[i]);
    }
}

template <int R, int NC, bool BF16>
void pv_tile(const float *p, int64_t ldp, const void *v, int64_t t0, int64_t t1, int64_t hd, int64_t c0, float *out,
             int64_t ldo) {
    __m512 acc[R][NC];
    for (int i = 0; i < R; ++i)
        for (int c = 0; c < NC; ++c) acc[i][c] = _mm512_loadu_ps(out + i * ldo + c0 + 16 * c);
    for (int64_t t = t0; t < t1; ++t) {
        __m512 vv[NC];
        for (int c = 0; c < NC; ++c) vv[c] = load16<BF16>(v, t * hd + c0 + 16 * c, 0xffff);
        for (int i = 0; i < R; ++i) {
            const __m512 w = _mm512_set1_ps(p[i * ldp + (t - t0)]);
            for (int c = 0; c < NC; ++c) acc[i][c] = _mm512_fmadd_ps(w, vv[c], acc[i][c]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + i * ldo + c0 + 16 * c, acc[i][c]);
}

template <bool BF16>
void qk_rows(const float *q, int64_t ldq, int64_t rows, const void *kt, int64_t ldk, int64_t t0, int64_t t1,
             int64_t hd, float *s, int64_t lds) {
    for (int64_t r = 0; r < rows; r += kRows) {
        const float *qr = q + r * ldq;
        float *sr = s + r * lds;
        switch (std::min<int64_t>(kRows, rows - r)) {
        case 8: qk_tile<8, BF16>(qr, ldq, kt, ldk, t0, t1, hd, sr, lds); break;
        case 7: qk_tile<7, BF16>(qr, ldq, kt, ldk, t0, t1, hd, sr, lds); break;
        case 6: qk_tile<6, BF16>(qr, ldq, kt, ldk, t0, t1, hd, sr, lds); break;
        case 5: qk_tile<5, BF16>(qr, ldq, kt, ldk, t0, t1, hd, sr, lds); break;
        case 4: qk_tile<4, BF16>(qr, ldq, kt, ldk, t0, t1, hd, sr, lds); break;
        case 3: qk_tile<3, BF16>(qr, ldq, kt, ldk, t0, t1, hd, sr, lds); break;
        case 2: qk_tile<2, BF16>(qr, ldq, kt, ldk, t0, t1, hd, sr, lds); break;
        default: qk_tile<1, BF16>(qr, ldq, kt, ldk, t0, t1, hd, sr, lds); break;
        }
    }
}

template <int NC, bool BF16>
void pv_cols(const float *p, int64_t ldp, int64_t rows, const void *v, int64_t t0, int64_t t1, int64_t hd, int64_t c0,
             float *out, int64_t ldo) {
    for (int64_t r = 0; r < rows; r += kRows) {
        const float *pr = p + r * ldp;
        float *o = out + r * ldo;
        switch (std::min<int64_t>(kRows, rows - r)) {
        case 8: pv_tile<8, NC, BF16>(pr, ldp, v, t0, t1, hd, c0, o, ldo); break;
        case 7: pv_tile<7, NC, BF16>(pr, ldp, v, t0, t1, hd, c0, o, ldo); break;
        case 6: pv_tile<6, NC, BF16>(pr, ldp, v, t0, t1, hd, c0, o, ldo); break;
        case 5: pv_tile<5, NC, BF16>(pr, ldp, v, t0, t1, hd, c0, o, ldo); break;
        case 4: pv_tile<4, NC, BF16>(pr, ldp, v, t0, t1, hd, c0, o, ldo); break;
        case 3: pv_tile<3, NC, BF16>(pr, ldp, v, t0, t1, hd, c0, o, ldo); break;
        case 2: pv_tile<2, NC, BF16>(pr, ldp, v, t0, t1, hd, c0, o, ldo); break;
        default: pv_tile<1, NC, BF16>(pr, ldp, v, t0, t1, hd, c0, o, ldo); break;
        }
    }
}

template <bool BF16>
void pv_rows(const float *p, int64_t ldp, int64_t rows, const void *v, int64_t t0, int64_t t1, int64_t hd, float *out,
             int64_t ldo) {
    int64_t c0 = 0;
    for (; c0 + 32 <= hd; c0 += 32) pv_cols<2, BF16>(p, ldp, rows, v, t0, t1, hd, c0, out, ldo);
    if (c0 < hd) pv_cols<1, BF16>(p, ldp, rows, v, t0, t1, hd, c0, out, ldo);
}

}  // namespace

void softmax_rows_avx512(float *s, int64_t rows, int64_t lds, int64_t n, float scale) {
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int64_t r = 0; r < rows; ++r) {
        float *row = s + r * lds;
        __m512 vmax = _mm512_set1_ps(-__builtin_inff());
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 mask = tail_mask(n - i);
            vmax = _mm512_mask_max_ps(vmax, mask, vmax, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, row + i), vscale));
        }
        const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
        __m512 vsum = _mm512_setzero_ps();
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 mask = tail_mask(n - i);
            const __m512 e = exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(mask, row + i), vscale, m));
            vsum = _mm512_mask_add_ps(vsum, mask, vsum, e);
            _mm512_mask_storeu_ps(row + i, mask, e);
        }
        const __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(vsum));
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 mask = tail_mask(n - i);
            _mm512_mask_storeu_ps(row + i, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, row + i), inv));
        }
    }
}

void online_softmax_block_avx512(float *s, int64_t n, int64_t lo, int64_t hi, float scale, float *m, float *sum,
                                 float *acc, int64_t hd) {
    // The block's final scores in place: scaled where visible, -inf elsewhere (weight 0).
    const __m512 vscale = _mm512_set1_ps(scale), hidden = _mm512_set1_ps(-__builtin_inff());
    __m512 vmax = hidden;
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 lanes = tail_mask(n - j);
        const __mmask16 visible = lanes & ::ipex::kernels::avx512::lanes_within(j, lo, hi);
        const __m512 x = _mm512_mask_mul_ps(hidden, visible, _mm512_maskz_loadu_ps(lanes, s + j), vscale);
        _mm512_mask_storeu_ps(s + j, lanes, x);
        vmax = _mm512_max_ps(vmax, x);
    }
    ::ipex::kernels::avx512::online_softmax_block(
        s, n, _mm512_reduce_max_ps(vmax), m, sum, acc, hd, n,
        [s, n](int64_t j, __m512 e) { _mm512_mask_storeu_ps(s + j, tail_mask(n - j), e); });
}

void qk_block_avx512(CacheType type, const float *q, int64_t ldq, int64_t rows, const void *kt, int64_t ldk,
                     int64_t t0, int64_t t1, int64_t head_dim, float *s, int64_t lds) {
    if (type == CacheType::bf16) qk_rows<true>(q, ldq, rows, kt, ldk, t0, t1, head_dim, s, lds);
    else qk_rows<false>(q, ldq, rows, kt, ldk, t0, t1, head_dim, s, lds);
}

void pv_block_avx512(CacheType type, const float *p, int64_t ldp, int64_t rows, const void *v, int64_t t0, int64_t t1,
                     int64_t head_dim, float *out, int64_t ldo) {
    if (type == CacheType::bf16) pv_rows<true>(p, ldp, rows, v, t0, t1, head_dim, out, ldo);
    else pv_rows<false>(p, ldp, rows, v, t0, t1, head_dim, out, ldo);
}

}  // namespace ipex::llm::kernels
