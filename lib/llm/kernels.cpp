#include "llm/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "base/isa.h"

namespace ipex::llm::kernels {
namespace {
std::atomic<bool> g_force_portable{false};

template <typename T>
inline float load(const T *p, int64_t i);
template <>
inline float load<float>(const float *p, int64_t i) { return p[i]; }
template <>
inline float load<uint16_t>(const uint16_t *p, int64_t i) { return from_bf16(p[i]); }

template <typename T>
void qk_ref(const float *q, int64_t ldq, int64_t rows, const T *kt, int64_t ldk, int64_t t0, int64_t t1, int64_t hd,
            float *s, int64_t lds) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = t0; t < t1; ++t) {
            float acc = 0;
            for (int64_t d = 0; d < hd; ++d) acc += q[r * ldq + d] * load(kt, d * ldk + t);
            s[r * lds + t - t0] = acc;
        }
}

template <typename T>
void pv_ref(const float *p, int64_t ldp, int64_t rows, const T *v, int64_t t0, int64_t t1, int64_t hd, float *out,
            int64_t ldo) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = t0; t < t1; ++t) {
            const float w = p[r * ldp + t - t0];
            if (w == 0.f) continue;
            for (int64_t d = 0; d < hd; ++d) out[r * ldo + d] += w * load(v, t * hd + d);
        }
}

}  // namespace

void rms_norm(const float *x, const float *weight, float *y, int64_t rows, int64_t n, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float *src = x + r * n;
        float *dst = y + r * n;
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(src[i]) * src[i];
        const float inv = 1.f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
        for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * inv * weight[i];
    }
}

void add_rms_norm(float *h, const float *delta, const float *weight, float *y, int64_t rows, int64_t n, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        float *row = h + r * n;
        const float *d = delta + r * n;
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) {
            row[i] += d[i];
            ss += static_cast<double>(row[i]) * row[i];
        }
        const float inv = 1.f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
        float *dst = y + r * n;
        for (int64_t i = 0; i < n; ++i) dst[i] = row[i] * inv * weight[i];
    }
}

void gelu_tanh_mul(const float *gu, float *out, int64_t rows, int64_t inter) {
    const float k = std::sqrt(2.f / static_cast<float>(M_PI));
    for (int64_t r = 0; r < rows; ++r) {
        const float *g = gu + r * 2 * inter, *u = g + inter;
        float *o = out + r * inter;
        for (int64_t i = 0; i < inter; ++i)
            o[i] = 0.5f * g[i] * (1.f + std::tanh(k * (g[i] + 0.044715f * g[i] * g[i] * g[i]))) * u[i];
    }
}

void softcap(float *x, int64_t n, float scale, float cap) {
    for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * scale / cap);
}

void silu_mul(const float *gu, float *out, int64_t rows, int64_t inter) {
    if (avx512_ok()) silu_mul_avx512(gu, out, rows, inter);
    else silu_mul_ref(gu, out, rows, inter);
}

void silu_mul_ref(const float *gu, float *out, int64_t rows, int64_t inter) {
    for (int64_t r = 0; r < rows; ++r) {
        const float *g = gu + r * 2 * inter, *u = g + inter;
        float *o = out + r * inter;
        for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
    }
}

void rope_row(float *x, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float *cos, const float *sin) {
    const int64_t half = rotary_dim / 2;
    for (int64_t h = 0; h < heads; ++h) {
        float *a = x + h * head_dim, *b = a + half;
        for (int64_t i = 0; i < half; ++i) {
            const float x1 = a[i], x2 = b[i];
            a[i] = x1 * cos[i] - x2 * sin[i];
            b[i] = x2 * cos[i] + x1 * sin[i];
        }
    }
}

void softmax_rows_ref(float *s, int64_t rows, int64_t lds, int64_t n, float scale) {
    for (int64_t r = 0; r < rows; ++r) {
        float *row = s + r * lds;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < n; ++i) m = std::max(m, row[i] * scale);
        float sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += row[i] = std::exp(row[i] * scale - m);
        const float inv = 1.f / sum;
        for (int64_t i = 0; i < n; ++i) row[i] *= inv;
    }
}

void softmax_rows(float *s, int64_t rows, int64_t lds, int64_t n, float scale) {
    if (avx512_ok()) softmax_rows_avx512(s, rows, lds, n, scale);
    else softmax_rows_ref(s, rows, lds, n, scale);
}

void qk_block_ref(CacheType type, const float *q, int64_t ldq, int64_t rows, const void *kt, int64_t ldk, int64_t t0,
                  int64_t t1, int64_t head_dim, float *s, int64_t lds) {
    if (type == CacheType::f32)
        qk_ref(q, ldq, rows, static_cast<const float *>(kt), ldk, t0, t1, head_dim, s, lds);
    else
        qk_ref(q, ldq, rows, static_cast<const uint16_t *>(kt), ldk, t0, t1, head_dim, s, lds);
}

void pv_block_ref(CacheType type, const float *p, int64_t ldp, int64_t rows, const void *v, int64_t t0, int64_t t1,
                  int64_t head_dim, float *out, int64_t ldo) {
    if (type == CacheType::f32)
        pv_ref(p, ldp, rows, static_cast<const float *>(v), t0, t1, head_dim, out, ldo);
    else
        pv_ref(p, ldp, rows, static_cast<const uint16_t *>(v), t0, t1, head_dim, out, ldo);
}

namespace {

float widen(float v) { return v; }
float widen(uint16_t v) { return from_bf16(v); }

// Written without library calls so the compiler vectorizes it: the clamp first (it commutes
// with rounding to an integer at integer bounds), then rounding by adding and subtracting
// 1.5 * 2^23, exact in round-to-nearest-even for |v| <= 2^22.
template <typename T>
void quantize_row(const T *in, const float *m, int8_t *out, int64_t k) {
    constexpr float kMax = 127.f, kRound = 12582912.0f;  // 1.5 * 2^23
    for (int64_t j = 0; j < k; ++j) {
        float v = widen(in[j]) * m[j];
        v = v == v ? v : 0.0f;
        v = v < kMax ? v : kMax;
        v = v > -kMax ? v : -kMax;
        v = (v + kRound) - kRound;
        out[j] = static_cast<int8_t>(static_cast<int32_t>(v));
    }
}

}  // namespace

void quantize_row_s8_ref(const float *in, const float *m, int8_t *out, int64_t k) { quantize_row(in, m, out, k); }
void quantize_row_s8_ref(const uint16_t *in, const float *m, int8_t *out, int64_t k) { quantize_row(in, m, out, k); }

void quantize_row_s8(const float *in, const float *m, int8_t *out, int64_t k) {
    if (avx512_ok()) quantize_row_s8_avx512(in, m, out, k);
    else quantize_row_s8_ref(in, m, out, k);
}

void quantize_row_s8(const uint16_t *in, const float *m, int8_t *out, int64_t k) {
    if (avx512_ok()) quantize_row_s8_avx512(in, m, out, k);
    else quantize_row_s8_ref(in, m, out, k);
}

void online_softmax_block_ref(float *s, int64_t n, int64_t lo, int64_t hi, float scale, float cap, float *m,
                              float *sum, float *acc, int64_t hd) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    float mx = *m;
    for (int64_t j = 0; j < n; ++j) {
        if (j < lo || j >= hi) s[j] = kNegInf;
        else if (cap > 0) s[j] = cap * std::tanh(s[j] * scale / cap);
        else s[j] *= scale;
        mx = std::max(mx, s[j]);
    }
    if (mx == kNegInf) {  // nothing visible yet in this row
        std::fill(s, s + n, 0.f);
        return;
    }
    const float correction = std::exp(*m - mx);
    float add = 0;
    for (int64_t j = 0; j < n; ++j) add += s[j] = std::exp(s[j] - mx);
    *sum = *sum * correction + add;
    *m = mx;
    if (correction != 1.f)
        for (int64_t d = 0; d < hd; ++d) acc[d] *= correction;
}

void online_softmax_block(float *s, int64_t n, int64_t lo, int64_t hi, float scale, float cap, float *m, float *sum,
                          float *acc, int64_t hd) {
    if (cap <= 0 && avx512_ok()) online_softmax_block_avx512(s, n, lo, hi, scale, m, sum, acc, hd);
    else online_softmax_block_ref(s, n, lo, hi, scale, cap, m, sum, acc, hd);
}

bool avx512_ok() { return !g_force_portable.load() && isa::avx512(); }
void set_force_portable(bool on) { g_force_portable = on; }

void qk_block(CacheType type, const float *q, int64_t ldq, int64_t rows, const void *kt, int64_t ldk, int64_t t0,
              int64_t t1, int64_t head_dim, float *s, int64_t lds) {
    if (head_dim % 16 == 0 && avx512_ok())
        qk_block_avx512(type, q, ldq, rows, kt, ldk, t0, t1, head_dim, s, lds);
    else
        qk_block_ref(type, q, ldq, rows, kt, ldk, t0, t1, head_dim, s, lds);
}

void pv_block(CacheType type, const float *p, int64_t ldp, int64_t rows, const void *v, int64_t t0, int64_t t1,
              int64_t head_dim, float *out, int64_t ldo) {
    if (head_dim % 16 == 0 && avx512_ok())
        pv_block_avx512(type, p, ldp, rows, v, t0, t1, head_dim, out, ldo);
    else
        pv_block_ref(type, p, ldp, rows, v, t0, t1, head_dim, out, ldo);
}

}  // namespace ipex::llm::kernels
