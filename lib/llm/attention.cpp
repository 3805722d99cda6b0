#include "llm/attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/scratch.h"

namespace ipex::llm {
namespace {

using kernels::CacheType;

// Queries per prefill block (of one head), keys per block of scores.
constexpr int64_t kQueryBlock = 32;
constexpr int64_t kKeyBlock = 256;

// Per-thread scratch that only grows: steady-state steps allocate nothing.
float *scratch(size_t slot, size_t floats) {
    thread_local ScratchBuffer buffers[3];
    return buffers[slot].get<float>(floats);
}

size_t elem_size(CacheType t) { return t == CacheType::f32 ? 4 : 2; }

}  // namespace

KvCache::KvCache(CacheType type, int64_t layers, int64_t batch, int64_t kv_heads, int64_t head_dim, int64_t max_length)
    : type_(type), layers_(layers), batch_(batch), kv_heads_(kv_heads), head_dim_(head_dim), max_length_(max_length) {
    const at::ScalarType st = type == CacheType::f32 ? at::kFloat : at::kBFloat16;
    for (int64_t l = 0; l < layers; ++l) {
        // Zeroed: positions past a sequence's length meet zero probabilities, never NaN.
        k_.push_back(at::zeros({batch, kv_heads, head_dim, max_length}, st));
        v_.push_back(at::zeros({batch, kv_heads, max_length, head_dim}, st));
    }
}

uint64_t KvCache::bytes() const {
    return static_cast<uint64_t>(2 * layers_ * batch_ * kv_heads_ * head_dim_ * max_length_) * elem_size(type_);
}

size_t KvCache::offset(int64_t seq, int64_t head) const {
    return static_cast<size_t>(((seq * kv_heads_ + head) * head_dim_ * max_length_)) * elem_size(type_);
}

const void *KvCache::keys(int64_t layer, int64_t seq, int64_t head) const {
    return static_cast<const char *>(k_[static_cast<size_t>(layer)].data_ptr()) + offset(seq, head);
}

const void *KvCache::values(int64_t layer, int64_t seq, int64_t head) const {
    return static_cast<const char *>(v_[static_cast<size_t>(layer)].data_ptr()) + offset(seq, head);
}

void KvCache::write(int64_t layer, int64_t seq, int64_t pos, const float *k, const float *v) {
    char *kb = static_cast<char *>(k_[static_cast<size_t>(layer)].data_ptr());
    char *vb = static_cast<char *>(v_[static_cast<size_t>(layer)].data_ptr());
    for (int64_t h = 0; h < kv_heads_; ++h) {
        const float *ks = k + h * head_dim_, *vs = v + h * head_dim_;
        if (type_ == CacheType::f32) {
            float *kt = reinterpret_cast<float *>(kb + offset(seq, h));
            float *vt = reinterpret_cast<float *>(vb + offset(seq, h)) + pos * head_dim_;
            for (int64_t d = 0; d < head_dim_; ++d) {
                kt[d * max_length_ + pos] = ks[d];
                vt[d] = vs[d];
            }
        } else {
            uint16_t *kt = reinterpret_cast<uint16_t *>(kb + offset(seq, h));
            uint16_t *vt = reinterpret_cast<uint16_t *>(vb + offset(seq, h)) + pos * head_dim_;
            for (int64_t d = 0; d < head_dim_; ++d) {
                kt[d * max_length_ + pos] = kernels::to_bf16(ks[d]);
                vt[d] = kernels::to_bf16(vs[d]);
            }
        }
    }
}

void decode_attention(const KvCache &cache, int64_t layer, const AttentionShape &shape, const float *q, int64_t ldq,
                      const int64_t *lengths, int64_t batch, float *out, int64_t ldo) {
    const int64_t group = shape.heads / shape.kv_heads, hd = shape.head_dim, ld = cache.max_length();
    at::parallel_for(0, batch * shape.kv_heads, 1, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
            const int64_t b = task / shape.kv_heads, h = task % shape.kv_heads;
            const int64_t len = lengths[b];
            const int64_t t0 = shape.window > 0 ? std::max<int64_t>(0, len - shape.window) : 0;
            const int64_t n = len - t0;
            float *s = scratch(0, static_cast<size_t>(group * n));
            const float *qh = q + b * ldq + h * group * hd;
            kernels::qk_block(cache.type(), qh, hd, group, cache.keys(layer, b, h), ld, t0, len, hd, s, n);
            if (shape.softcap > 0) {
                kernels::softcap(s, group * n, shape.scale, shape.softcap);
                kernels::softmax_rows(s, group, n, n, 1.f);
            } else {
                kernels::softmax_rows(s, group, n, n, shape.scale);
            }
            float *o = out + b * ldo + h * group * hd;
            for (int64_t g = 0; g < group; ++g) std::fill(o + g * hd, o + (g + 1) * hd, 0.f);
            kernels::pv_block(cache.type(), s, n, group, cache.values(layer, b, h), t0, len, hd, o, hd);
        }
    });
}

void prefill_attention(const KvCache &cache, int64_t layer, const AttentionShape &shape, const float *q, int64_t ldq,
                       int64_t seq, int64_t p0, int64_t rows, float *out, int64_t ldo) {
    const int64_t group = shape.heads / shape.kv_heads, hd = shape.head_dim, ld = cache.max_length();
    const int64_t qblocks = (rows + kQueryBlock - 1) / kQueryBlock;
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    at::parallel_for(0, shape.kv_heads * qblocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
            const int64_t h = task / qblocks, qb = task % qblocks;
            const int64_t i0 = qb * kQueryBlock, nq = std::min(kQueryBlock, rows - i0);
            const int64_t n = group * nq;  // block rows: (head in group, query)
            float *qs = scratch(0, static_cast<size_t>(n * hd));
            float *acc = scratch(1, static_cast<size_t>(n * (hd + 2) + n * kKeyBlock));
            float *mx = acc + n * hd, *sum = mx + n, *s = sum + n;
            for (int64_t g = 0; g < group; ++g)
                for (int64_t i = 0; i < nq; ++i) {
                    const float *src = q + (i0 + i) * ldq + (h * group + g) * hd;
                    std::copy(src, src + hd, qs + (g * nq + i) * hd);
                }
            std::fill(acc, acc + n * hd, 0.f);
            std::fill(mx, mx + n, kNegInf);
            std::fill(sum, sum + n, 0.f);
            const int64_t last = p0 + i0 + nq - 1;  // last query position of the block
            const int64_t first = p0 + i0;
            const int64_t lo = shape.window > 0 ? std::max<int64_t>(0, first - shape.window + 1) : 0;
            for (int64_t t0 = lo; t0 <= last; t0 += kKeyBlock) {
                const int64_t t1 = std::min(last + 1, t0 + kKeyBlock), nk = t1 - t0;
                kernels::qk_block(cache.type(), qs, hd, n, cache.keys(layer, seq, h), ld, t0, t1, hd, s, kKeyBlock);
                for (int64_t r = 0; r < n; ++r) {
                    const int64_t pos = p0 + i0 + r % nq;
                    const int64_t kmin = shape.window > 0 ? pos - shape.window + 1 : 0;
                    // keys t0 + j visible for kmin <= t0 + j <= pos
                    kernels::online_softmax_block(s + r * kKeyBlock, nk, kmin - t0, pos - t0 + 1, shape.scale,
                                                  shape.softcap, &mx[r], &sum[r], acc + r * hd, hd);
                }
                kernels::pv_block(cache.type(), s, kKeyBlock, n, cache.values(layer, seq, h), t0, t1, hd, acc, hd);
            }
            for (int64_t g = 0; g < group; ++g)
                for (int64_t i = 0; i < nq; ++i) {
                    const int64_t r = g * nq + i;
                    const float inv = 1.f / sum[r];
                    float *dst = out + (i0 + i) * ldo + (h * group + g) * hd;
                    for (int64_t d = 0; d < hd; ++d) dst[d] = acc[r * hd + d] * inv;
                }
        }
    });
}

}  // namespace ipex::llm
