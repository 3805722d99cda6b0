// AVX512-BF16 GEMV of Bf16Decode. Only target attributes carry the ISA (the file is built
// with the project's flags), and it includes no libtorch or standard library header.
//
// One output row at a time (with the gate/up pair, the gate row and its up row), 32 input
// channels per step: each weight vector is multiplied with every activation row's
// (VDPBF16PS, fp32 sums of pairs) into accumulators reduced horizontally once per row. The
// rows of one call are consecutive, so the weights come in as one sequential stream (one per
// part of a weight held in parts), which the hardware prefetcher follows: on the machine
// measured, software prefetches or several rows read side by side streamed slower (22-25 GB/s
// against 28), and prefetching a row ahead did not lift the rate from a mapped file's 4 KiB
// pages either (31 GB/s there against 37 from huge pages, 2026-12-08).
#include <immintrin.h>

#include "llm/bf16_decode_kernel.h"

#define IPEX_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

namespace ipex::llm::kernels {
namespace {

IPEX_BF16_TARGET inline float silu_times(float g, float u) { return g / (1.f + __builtin_expf(-g)) * u; }

// Independent accumulators per (row, activation row): enough to hide VDPBF16PS's latency
// behind the loads when there are few activation rows.
template <int M>
constexpr int unroll_for() {
    return M == 1 ? 4 : (M == 2 ? 2 : 1);
}

// Row n of the weight, in whichever part holds it.
inline const uint16_t *weight_row(const Bf16GemvArgs &a, int64_t n) {
    int p = 0;
    while (p + 1 < a.parts && n >= a.end[p]) ++p;
    return a.w[p] + (n - (p == 0 ? 0 : a.end[p - 1])) * a.ldw;
}

// Output n (and, when GLU, its up row at n + a.up_offset) for M activation rows.
template <int M, bool GLU>
IPEX_BF16_TARGET void row(const Bf16GemvArgs &a, int64_t n) {
    constexpr int S = GLU ? 2 : 1, U = unroll_for<M>();
    __m512 acc[S][M][U];
    const uint16_t *w[S];
    for (int s = 0; s < S; ++s) {
        w[s] = weight_row(a, s == 0 ? n : n + a.up_offset);
        for (int m = 0; m < M; ++m)
            for (int u = 0; u < U; ++u) acc[s][m][u] = _mm512_setzero_ps();
    }
    int64_t c = 0;
    for (; c + 32 * U <= a.k; c += 32 * U)
        for (int u = 0; u < U; ++u) {
            __m512i xv[M];
            for (int m = 0; m < M; ++m) xv[m] = _mm512_loadu_si512(a.x + m * a.ldx + c + 32 * u);
            for (int s = 0; s < S; ++s) {
                const __m512bh wv = (__m512bh)_mm512_loadu_si512(w[s] + c + 32 * u);
                for (int m = 0; m < M; ++m) acc[s][m][u] = _mm512_dpbf16_ps(acc[s][m][u], wv, (__m512bh)xv[m]);
            }
        }
    for (; c < a.k; c += 32) {  // the last vectors; weights masked past the row, x is zero there
        const __mmask32 mask = a.k - c >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1ull << (a.k - c)) - 1);
        for (int s = 0; s < S; ++s) {
            const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(mask, w[s] + c);
            for (int m = 0; m < M; ++m)
                acc[s][m][0] = _mm512_dpbf16_ps(acc[s][m][0], wv, (__m512bh)_mm512_loadu_si512(a.x + m * a.ldx + c));
        }
    }
    for (int m = 0; m < M; ++m) {
        float sum[S];
        for (int s = 0; s < S; ++s) {
            for (int u = 1; u < U; ++u) acc[s][m][0] = _mm512_add_ps(acc[s][m][0], acc[s][m][u]);
            sum[s] = _mm512_reduce_add_ps(acc[s][m][0]);
        }
        float v = sum[0] + (a.bias ? a.bias[n] : 0.f);
        if constexpr (GLU) v = silu_times(v, sum[S - 1] + (a.bias ? a.bias[n + a.up_offset] : 0.f));
        else if (a.residual) v += a.residual[m * a.ldr + n];
        a.out[m * a.ldo + n] = v;
    }
}

template <int M, bool GLU>
IPEX_BF16_TARGET void rows(const Bf16GemvArgs &a, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) row<M, GLU>(a, n);
}

template <bool GLU>
IPEX_BF16_TARGET void dispatch(const Bf16GemvArgs &a, int64_t n0, int64_t n1) {
    switch (a.m) {
    case 1: rows<1, GLU>(a, n0, n1); break;
    case 2: rows<2, GLU>(a, n0, n1); break;
    case 3: rows<3, GLU>(a, n0, n1); break;
    case 4: rows<4, GLU>(a, n0, n1); break;
    case 5: rows<5, GLU>(a, n0, n1); break;
    case 6: rows<6, GLU>(a, n0, n1); break;
    case 7: rows<7, GLU>(a, n0, n1); break;
    default: rows<8, GLU>(a, n0, n1); break;
    }
}

}  // namespace

IPEX_BF16_TARGET void bf16_gemv_avx512(const Bf16GemvArgs &a, int64_t n0, int64_t n1) {
    if (a.up_offset > 0) dispatch<true>(a, n0, n1);
    else dispatch<false>(a, n0, n1);
}

}  // namespace ipex::llm::kernels
