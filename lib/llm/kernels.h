// Raw-pointer kernels of the decoder (no libtorch types): RMSNorm, add+RMSNorm, SiLU·mul,
// rotary embedding in place, and the two blocks attention is built from. Every kernel works
// on the rows it is given; callers parallelize across rows or heads.
//
// The KV cache holds, per layer, sequence and KV head, K transposed [head_dim][max_len] and
// V [max_len][head_dim], elements fp32 or bf16 (uint16 bits): scores for 16 positions are
// then one vector per query row with no horizontal sums.
#pragma once

#include "kernels/bf16.h"

#include <cstdint>

namespace ipex::llm::kernels {

// y[r] = x[r] / rms(x[r]) * weight, r < rows; rows of n.
void rms_norm(const float *x, const float *weight, float *y, int64_t rows, int64_t n, float eps);
// h[r] += delta[r] (the residual add), then y[r] = rms_norm(h[r]).
void add_rms_norm(float *h, const float *delta, const float *weight, float *y, int64_t rows, int64_t n, float eps);
// out[r, i] = silu(gu[r, i]) * gu[r, inter + i]; gu rows of 2*inter.
void silu_mul(const float *gu, float *out, int64_t rows, int64_t inter);
// out[j] = clamp(round_half_even(in[j] * m[j]), -127, 127) (the product in fp32, a NaN to 0),
// j < k: the W8A8 linear's activation quantize step; in fp32 or bf16 (uint16 bits).
void quantize_row_s8(const float *in, const float *m, int8_t *out, int64_t k);
void quantize_row_s8(const uint16_t *in, const float *m, int8_t *out, int64_t k);
// The same with gelu's tanh form: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
void gelu_tanh_mul(const float *gu, float *out, int64_t rows, int64_t inter);
// x[i] = cap * tanh(x[i] * scale / cap), i < n: soft-capping of scaled scores or logits.
void softcap(float *x, int64_t n, float scale, float cap);
// Rotates the first `rotary_dim` channels of each head of head_dim in place (HF's rotate_half
// convention: pairs (i, i + rotary_dim/2)); the rest pass (partial rotary). cos/sin hold the
// rotary_dim/2 angles of the position.
void rope_row(float *x, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float *cos, const float *sin);

// Cache element types.
enum class CacheType { f32, bf16 };

// s[r][t - t0] = sum_d q[r][d] * kt[d][t], t in [t0, t1), r < rows; q fp32 rows of ldq,
// kt [head_dim][ldk] of `type`, s rows of lds.
void qk_block(CacheType type, const float *q, int64_t ldq, int64_t rows, const void *kt, int64_t ldk, int64_t t0,
              int64_t t1, int64_t head_dim, float *s, int64_t lds);
// out[r][:] += sum_t p[r][t - t0] * v[t][:], t in [t0, t1); v [max_len][head_dim] of `type`.
void pv_block(CacheType type, const float *p, int64_t ldp, int64_t rows, const void *v, int64_t t0, int64_t t1,
              int64_t head_dim, float *out, int64_t ldo);

// s[r][i] = exp(scale * s[r][i] - m_r) / sum_i exp(scale * s[r][i] - m_r), i < n, r < rows
// (rows of lds, m_r the row's largest scaled score): decode attention's probabilities.
void softmax_rows(float *s, int64_t rows, int64_t lds, int64_t n, float scale);

// One key block of prefill attention's online softmax, for one query row: s[j] (j < n) are the
// raw scores of the block's keys, those outside [lo, hi) hidden; each visible one is scaled by
// `scale` (soft-capped first when cap > 0: cap * tanh(s * scale / cap)). With m, sum the row's
// running largest score and sum of weights and acc[0, hd) its running output: m becomes the
// largest of m and the block's scores, acc and sum are rescaled by exp(m_old - m_new), s[j]
// becomes the block's weights exp(s'[j] - m) (0 where hidden) and sum gains their total. A row
// with nothing visible yet (m stays -inf) gets weights 0 and keeps its state.
void online_softmax_block(float *s, int64_t n, int64_t lo, int64_t hi, float scale, float cap, float *m, float *sum,
                          float *acc, int64_t hd);

// Portable versions (the reference of the unit tests) and the AVX-512 ones (head_dim a
// multiple of 16; call only when avx512_ok()).
void qk_block_ref(CacheType type, const float *q, int64_t ldq, int64_t rows, const void *kt, int64_t ldk, int64_t t0,
                  int64_t t1, int64_t head_dim, float *s, int64_t lds);
void pv_block_ref(CacheType type, const float *p, int64_t ldp, int64_t rows, const void *v, int64_t t0, int64_t t1,
                  int64_t head_dim, float *out, int64_t ldo);
void qk_block_avx512(CacheType type, const float *q, int64_t ldq, int64_t rows, const void *kt, int64_t ldk,
                     int64_t t0, int64_t t1, int64_t head_dim, float *s, int64_t lds);
void pv_block_avx512(CacheType type, const float *p, int64_t ldp, int64_t rows, const void *v, int64_t t0, int64_t t1,
                     int64_t head_dim, float *out, int64_t ldo);
void softmax_rows_ref(float *s, int64_t rows, int64_t lds, int64_t n, float scale);
void softmax_rows_avx512(float *s, int64_t rows, int64_t lds, int64_t n, float scale);
void online_softmax_block_ref(float *s, int64_t n, int64_t lo, int64_t hi, float scale, float cap, float *m,
                              float *sum, float *acc, int64_t hd);
void online_softmax_block_avx512(float *s, int64_t n, int64_t lo, int64_t hi, float scale, float *m, float *sum,
                                 float *acc, int64_t hd);  // cap 0
void silu_mul_ref(const float *gu, float *out, int64_t rows, int64_t inter);
void quantize_row_s8_ref(const float *in, const float *m, int8_t *out, int64_t k);
void quantize_row_s8_ref(const uint16_t *in, const float *m, int8_t *out, int64_t k);
void quantize_row_s8_avx512(const float *in, const float *m, int8_t *out, int64_t k);
void quantize_row_s8_avx512(const uint16_t *in, const float *m, int8_t *out, int64_t k);
void silu_mul_avx512(const float *gu, float *out, int64_t rows, int64_t inter);
bool avx512_ok();
// Tests: force the portable blocks.
void set_force_portable(bool on);

using ::ipex::kernels::from_bf16;  // kernels/bf16.h
using ::ipex::kernels::to_bf16;

}  // namespace ipex::llm::kernels
