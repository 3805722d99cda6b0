// Portable kernels of ipex::woq_linear (any group size, any CPU).
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>

#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq::kernels {
namespace {

inline float weight_q(const WeightView &w, const uint8_t *row, int64_t k) {
    return static_cast<float>(w.bits == 4 ? int4_at(row, k) : row[k]);
}

}  // namespace

void gemv_f32_ref(const WeightView &w, const GemvF32 &a, int64_t n_begin, int64_t n_end) {
    for (int64_t n = n_begin; n < n_end; ++n) {
        const uint8_t *row = w.qweight + n * w.row_bytes();
        for (int64_t m = 0; m < a.m; ++m) {
            const float *x = a.x + m * w.kp;
            float y = 0.f;
            for (int64_t g = 0; g < w.groups; ++g) {
                float dot = 0.f;
                for (int64_t k = g * w.group_size; k < (g + 1) * w.group_size; ++k) dot += weight_q(w, row, k) * x[k];
                const float s = w.scales[n * w.groups + g];
                y += s * (dot - w.zeros[n * w.groups + g] * a.xsum[m * w.groups + g]);
            }
            a.out[m * a.ldo + n] = y;
        }
    }
}

void gemv_s8_ref(const WeightView &w, const GemvS8 &a, int64_t n_begin, int64_t n_end) {
    for (int64_t n = n_begin; n < n_end; ++n) {
        const uint8_t *row = w.qweight + n * w.row_bytes();
        for (int64_t m = 0; m < a.m; ++m) {
            const int8_t *x = a.xq + m * w.kp;
            float y = 0.f;
            for (int64_t g = 0; g < w.groups; ++g) {
                int32_t dot = 0;
                for (int64_t k = g * w.group_size; k < (g + 1) * w.group_size; ++k)
                    dot += static_cast<int32_t>(weight_q(w, row, k)) * x[k];
                const float s = w.scales[n * w.groups + g];
                y += s * (static_cast<float>(dot) - w.zeros[n * w.groups + g] * static_cast<float>(a.xsum[m * w.groups + g]));
            }
            a.out[m * a.ldo + n] = y * a.xscale[m];
        }
    }
}

void quantize_s8_ref(const QuantizeS8 &q) {
    for (int64_t i = 0; i < q.m; ++i) {
        const float *x = q.x + i * q.k;
        float amax = 0.f;
        for (int64_t c = 0; c < q.k; ++c) amax = std::max(amax, std::fabs(x[c]));
        const float scale = amax / 127.f > 0.f ? amax / 127.f : 1.f;
        int8_t *xq = q.xq + i * q.kp;
        for (int64_t c = 0; c < q.k; ++c)
            xq[c] = static_cast<int8_t>(std::clamp(std::nearbyint(x[c] / scale), -127.f, 127.f));
        std::fill(xq + q.k, xq + q.kp, int8_t(0));
        q.xscale[i] = scale;
        const int64_t groups = q.k / q.group_size;
        for (int64_t g = 0; g < groups; ++g) {
            int32_t sum = 0;
            for (int64_t c = g * q.group_size; c < (g + 1) * q.group_size; ++c) sum += xq[c];
            q.xsum[i * groups + g] = sum;
        }
    }
}

void dequant_f32_ref(const WeightView &w, float *dst, int64_t ld, int64_t n_begin, int64_t n_end) {
    for (int64_t n = n_begin; n < n_end; ++n) {
        const uint8_t *row = w.qweight + n * w.row_bytes();
        for (int64_t k = 0; k < w.k; ++k) {
            const int64_t g = k / w.group_size;
            dst[(n - n_begin) * ld + k] = (weight_q(w, row, k) - w.zeros[n * w.groups + g]) * w.scales[n * w.groups + g];
        }
    }
}

void dequant_bf16_ref(const WeightView &w, uint16_t *dst, int64_t ld, int64_t n_begin, int64_t n_end) {
    for (int64_t n = n_begin; n < n_end; ++n) {
        const uint8_t *row = w.qweight + n * w.row_bytes();
        for (int64_t k = 0; k < w.k; ++k) {
            const int64_t g = k / w.group_size;
            const float v = (weight_q(w, row, k) - w.zeros[n * w.groups + g]) * w.scales[n * w.groups + g];
            dst[(n - n_begin) * ld + k] = c10::BFloat16(v).x;
        }
    }
}

}  // namespace ipex::woq::kernels
