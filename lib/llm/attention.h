// The KV cache and the two attention drivers over it. The cache is allocated once for
// `batch` sequences of up to `max_length` positions (no growth, no concatenation: each step
// writes its position in place). Per layer, sequence and KV head: K transposed
// [head_dim][max_length] and V [max_length][head_dim], fp32 or bf16.
//   decode: one query per sequence; the query heads of a group read each K/V row once.
//   prefill: causal, in blocks of queries x keys with an online softmax (no [L, L] matrix).
// Sliding windows (Mistral): a query at p sees keys p - window + 1 .. p.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "llm/kernels.h"

namespace ipex::llm {

class KvCache {
public:
    KvCache() = default;
    KvCache(kernels::CacheType type, int64_t layers, int64_t batch, int64_t kv_heads, int64_t head_dim,
            int64_t max_length);

    kernels::CacheType type() const { return type_; }
    int64_t max_length() const { return max_length_; }
    int64_t batch() const { return batch_; }
    uint64_t bytes() const;
    // K^T of (layer, seq, kv head): [head_dim][max_length]; V: [max_length][head_dim].
    const void *keys(int64_t layer, int64_t seq, int64_t head) const;
    const void *values(int64_t layer, int64_t seq, int64_t head) const;
    // Stores position `pos` of `seq`: k and v hold kv_heads x head_dim floats each.
    void write(int64_t layer, int64_t seq, int64_t pos, const float *k, const float *v);

private:
    size_t offset(int64_t seq, int64_t head) const;
    kernels::CacheType type_ = kernels::CacheType::bf16;
    int64_t layers_ = 0, batch_ = 0, kv_heads_ = 0, head_dim_ = 0, max_length_ = 0;
    std::vector<at::Tensor> k_, v_;  // per layer
};

struct AttentionShape {
    int64_t heads = 0, kv_heads = 0, head_dim = 0;
    int64_t window = 0;  // 0: no sliding window
    float scale = 1.f;
    float softcap = 0.f;  // scaled scores -> softcap * tanh(score / softcap) (0: none)
};

// One query row per sequence b < batch: q rows of ldq floats (heads x head_dim), seq b has
// lengths[b] cached positions (its query is the last of them). out rows of ldo.
void decode_attention(const KvCache &cache, int64_t layer, const AttentionShape &shape, const float *q, int64_t ldq,
                      const int64_t *lengths, int64_t batch, float *out, int64_t ldo);

// `rows` queries of sequence `seq` at positions p0 .. p0 + rows - 1 (already in the cache).
void prefill_attention(const KvCache &cache, int64_t layer, const AttentionShape &shape, const float *q, int64_t ldq,
                       int64_t seq, int64_t p0, int64_t rows, float *out, int64_t ldo);

}  // namespace ipex::llm
