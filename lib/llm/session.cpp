// Session: the forward pass over the KV cache (prefill and decode share it).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "base/errors.h"
#include "llm/int4_decode.h"
#include "llm/kernels.h"
#include "llm/limits.h"
#include "llm/model.h"

namespace ipex::llm {
namespace {

// The router's logits fp32 [rows, experts] for x fp32 [rows, hidden] (router [hidden, experts]):
// each row by a loop along the experts, which the compiler vectorizes without reordering a sum
// (the reference BLAS that fp32 GEMMs reach in this libtorch took 6% of a mixture's prefill).
at::Tensor router_logits(const at::Tensor &router, const at::Tensor &x) {
    const int64_t rows = x.size(0), hidden = router.size(0), experts = router.size(1);
    const at::Tensor xc = x.contiguous();
    at::Tensor out = at::zeros({rows, experts}, at::kFloat);
    const float *w = router.data_ptr<float>(), *xv = xc.data_ptr<float>();
    float *ov = out.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float *xr = xv + r * hidden;
            float *o = ov + r * experts;
            for (int64_t k = 0; k < hidden; ++k) {
                const float v = xr[k];
                const float *wk = w + k * experts;
                for (int64_t e = 0; e < experts; ++e) o[e] += v * wk[e];
            }
        }
    });
    return out;
}

// A decode step on experts whose projections all run one decode kernel (Decode: Int4Decode, the
// tiled int4 layout, Linear::int4_step; or Bf16Decode, Linear::bf16_step; `step` gives a
// projection's): all their gate/up products in one parallel region, the activations, then all
// down products in another, instead of a fork and join per product. Adds each expert's output
// times its row's weight to out; false (nothing done) where an expert cannot run so.
template <class Decode, class Step>
bool experts_as_steps(const Experts &ex, const ModelConfig &c, const at::Tensor &x,
                      const std::vector<std::vector<int64_t>> &chosen, const std::vector<std::vector<float>> &weights,
                      at::Tensor &out, Step step) {
    struct Steps {
        size_t expert;
        const Decode *gate_up, *down;
    };
    std::vector<Steps> used;
    for (size_t e = 0; e < chosen.size(); ++e) {
        if (chosen[e].empty()) continue;
        const int64_t n = static_cast<int64_t>(chosen[e].size());
        const Steps s{e, step(ex.gate_up[e], n), step(ex.down[e], n)};
        if (!s.gate_up || !s.down) return false;
        used.push_back(s);
    }
    const int64_t rows = x.size(0), hidden = x.size(1);
    std::vector<typename Decode::Job> gate_up, down;
    std::vector<at::Tensor> gu, act, y;
    for (const Steps &s : used) {
        const std::vector<int64_t> &mine = chosen[s.expert];
        const int64_t n = static_cast<int64_t>(mine.size()), inter = s.gate_up->out_features() / 2;
        // An expert every row chose reads x itself: the jobs then prepare it once.
        const at::Tensor xe = n == rows ? x : x.index_select(0, at::tensor(mine, at::kLong));
        gu.push_back(at::empty({n, 2 * inter}, at::kFloat));
        gate_up.push_back({s.gate_up, xe, gu.back().data_ptr<float>(), 2 * inter});
    }
    Decode::decode_jobs(gate_up);
    for (size_t i = 0; i < used.size(); ++i) {
        const int64_t n = gu[i].size(0), inter = gu[i].size(1) / 2;
        act.push_back(at::empty({n, inter}, at::kFloat));
        if (c.gelu_mlp) kernels::gelu_tanh_mul(gu[i].data_ptr<float>(), act.back().data_ptr<float>(), n, inter);
        else kernels::silu_mul(gu[i].data_ptr<float>(), act.back().data_ptr<float>(), n, inter);
        y.push_back(at::empty({n, hidden}, at::kFloat));
        down.push_back({used[i].down, act.back(), y.back().data_ptr<float>(), hidden});
    }
    Decode::decode_jobs(down);
    float *o = out.data_ptr<float>();
    for (size_t i = 0; i < used.size(); ++i) {
        const size_t e = used[i].expert;
        for (size_t j = 0; j < chosen[e].size(); ++j) {
            float *dst = o + chosen[e][j] * hidden;
            const float *src = y[i].data_ptr<float>() + static_cast<int64_t>(j) * hidden, w = weights[e][j];
            for (int64_t h = 0; h < hidden; ++h) dst[h] += src[h] * w;
        }
    }
    return true;
}

// A sparse MLP over the normed rows x (fp32 [rows, hidden]): the router's softmax (in double)
// picks each row's experts_per_token experts, highest first (ties to the lower index), their
// weights renormalized with norm_topk_prob; the rows are grouped per expert so each chosen
// expert runs one product over its rows and an expert no row chose is not read. Returns the
// weighted sum (+ the shared expert times sigmoid of its gate), fp32 [rows, hidden].
at::Tensor run_experts(const Experts &ex, const ModelConfig &c, const at::Tensor &x, at::ScalarType act_type) {
    const int64_t rows = x.size(0), experts = c.num_experts, k = c.experts_per_token;
    const at::Tensor logits = router_logits(ex.router, x);
    std::vector<std::vector<int64_t>> chosen(static_cast<size_t>(experts));
    std::vector<std::vector<float>> weights(static_cast<size_t>(experts));
    std::vector<double> p(static_cast<size_t>(experts));
    std::vector<int64_t> order(static_cast<size_t>(experts));
    for (int64_t r = 0; r < rows; ++r) {
        const float *l = logits.data_ptr<float>() + r * experts;
        const double top = *std::max_element(l, l + experts);
        double sum = 0;
        for (int64_t e = 0; e < experts; ++e) sum += p[static_cast<size_t>(e)] = std::exp(static_cast<double>(l[e]) - top);
        for (double &v : p) v /= sum;
        for (int64_t e = 0; e < experts; ++e) order[static_cast<size_t>(e)] = e;
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
            const double pa = p[static_cast<size_t>(a)], pb = p[static_cast<size_t>(b)];
            return pa > pb || (pa == pb && a < b);
        });
        double total = 0;
        for (int64_t i = 0; i < k; ++i) total += p[static_cast<size_t>(order[static_cast<size_t>(i)])];
        if (!c.norm_topk_prob) total = 1;
        for (int64_t i = 0; i < k; ++i) {
            const size_t e = static_cast<size_t>(order[static_cast<size_t>(i)]);
            chosen[e].push_back(r);
            weights[e].push_back(static_cast<float>(p[e] / total));
        }
    }
    at::Tensor out = at::zeros({rows, x.size(1)}, at::kFloat);
    const auto mlp = [&](const Linear &gate_up, const Linear &down, const at::Tensor &in) {
        at::Tensor act = at::empty({in.size(0), gate_up.out_features() / 2}, at::kFloat);
        gate_up.forward_glu(in.to(act_type), act, c.gelu_mlp);
        return down.forward(act.to(act_type));
    };
    const auto int4 = [](const Linear &l, int64_t n) { return l.int4_step(n); };
    const auto bf16 = [](const Linear &l, int64_t n) { return l.bf16_step(n); };
    if (!experts_as_steps<Int4Decode>(ex, c, x, chosen, weights, out, int4) &&
        !experts_as_steps<Bf16Decode>(ex, c, x, chosen, weights, out, bf16))
        for (size_t e = 0; e < chosen.size(); ++e) {
            if (chosen[e].empty()) continue;
            const at::Tensor index = at::tensor(chosen[e], at::kLong);
            const at::Tensor y = mlp(ex.gate_up[e], ex.down[e], x.index_select(0, index));
            out.index_add_(0, index, y * at::tensor(weights[e]).unsqueeze(1));
        }
    if (ex.shared_gate.defined())
        out.add_(mlp(ex.shared_gate_up, ex.shared_down, x) * at::sigmoid(at::mv(x, ex.shared_gate)).unsqueeze(1));
    return out;
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model, int64_t batch, int64_t max_length, bool allow_long_context)
    : model_(std::move(model)), batch_(batch), max_length_(max_length) {
    const ModelConfig &c = model_->config();
    check_count("a session's batch", batch, counts::batch);
    check_count("a session's max_length", max_length, {1, kMaxPositions});
    check_positions(c, max_length, "the session (max_length)", allow_long_context);
    check_run_memory(c, {batch, max_length, 0, 0}, model_->cache_type() == kernels::CacheType::f32 ? 4 : 2,
                     "a session of " + std::to_string(batch) + " x " + std::to_string(max_length) + " positions");
    cache_ = KvCache(model_->cache_type(), c.num_layers, batch, c.num_kv_heads, c.head_dim, max_length);
    lengths_.assign(static_cast<size_t>(batch), 0);
    const size_t half = static_cast<size_t>(c.rotary_dim / 2);
    // longrope and yarn scale cos and sin by their attention factor (1 for the other kinds).
    const std::string &kind = c.rope_scaling.type;
    const float scale = kind == "longrope" || kind == "yarn" ? static_cast<float>(c.rope_scaling.attention_factor) : 1.f;
    const auto table = [&](const std::vector<float> &inv_freq, std::vector<float> &cos, std::vector<float> &sin) {
        cos.resize(static_cast<size_t>(max_length) * half);
        sin.resize(cos.size());
        for (int64_t p = 0; p < max_length; ++p)
            for (size_t i = 0; i < half; ++i) {
                const float angle = static_cast<float>(p) * inv_freq[i];
                cos[static_cast<size_t>(p) * half + i] = std::cos(angle) * scale;
                sin[static_cast<size_t>(p) * half + i] = std::sin(angle) * scale;
            }
    };
    table(model_->inv_freq_, cos_, sin_);
    if (!model_->inv_freq_long_.empty()) table(model_->inv_freq_long_, cos_long_, sin_long_);
    if (!model_->inv_freq_local_.empty()) table(model_->inv_freq_local_, cos_local_, sin_local_);
}

void Session::reset() { std::fill(lengths_.begin(), lengths_.end(), 0); }

Logits Session::prefill(const std::vector<std::vector<int32_t>> &tokens, bool all_positions) {
    if (static_cast<int64_t>(tokens.size()) > batch_)
        throw_usage(std::to_string(tokens.size()) + " prompts for a session of batch " + std::to_string(batch_));
    std::vector<int32_t> ids;
    std::vector<int64_t> rows;
    seq_.clear();
    pos_.clear();
    for (size_t b = 0; b < tokens.size(); ++b) {
        const int64_t len = lengths_[b], add = static_cast<int64_t>(tokens[b].size());
        if (len + add > max_length_)
            throw_usage("sequence " + std::to_string(b) + " needs " + std::to_string(len + add) +
                        " positions, more than --max-length " + std::to_string(max_length_));
        for (int64_t i = 0; i < add; ++i) {
            ids.push_back(tokens[b][static_cast<size_t>(i)]);
            seq_.push_back(static_cast<int64_t>(b));
            pos_.push_back(len + i);
            if (all_positions || i == add - 1) rows.push_back(static_cast<int64_t>(ids.size()) - 1);
        }
    }
    if (ids.empty()) throw_usage("nothing to prefill: every prompt is empty");
    const int64_t n = static_cast<int64_t>(ids.size());
    check_run_memory(model_->config(), {0, 0, n, static_cast<int64_t>(rows.size())}, 0,
                     "a prefill of " + std::to_string(n) + " tokens");
    return forward(ids, rows, false);
}

Logits Session::decode(const std::vector<int32_t> &tokens) {
    if (static_cast<int64_t>(tokens.size()) != batch_)
        throw_usage("decode takes one token per sequence (" + std::to_string(batch_) + "), got " +
                    std::to_string(tokens.size()));
    seq_.resize(static_cast<size_t>(batch_));
    pos_.resize(static_cast<size_t>(batch_));
    std::vector<int64_t> rows(static_cast<size_t>(batch_));
    for (int64_t b = 0; b < batch_; ++b) {
        if (lengths_[static_cast<size_t>(b)] + 1 > max_length_)
            throw_usage("sequence " + std::to_string(b) + " reached --max-length " + std::to_string(max_length_));
        seq_[static_cast<size_t>(b)] = b;
        pos_[static_cast<size_t>(b)] = lengths_[static_cast<size_t>(b)];
        rows[static_cast<size_t>(b)] = b;
    }
    return forward(tokens, rows, true);
}

Logits Session::forward(const std::vector<int32_t> &ids, const std::vector<int64_t> &logits_rows, bool decode_step) {
    const Model &m = *model_;
    const ModelConfig &c = m.config();
    const int64_t rows = static_cast<int64_t>(ids.size()), hidden = c.hidden_size, hd = c.head_dim;
    const int64_t qdim = c.num_heads * hd, kvdim = c.num_kv_heads * hd, half = c.rotary_dim / 2;
    const float eps = static_cast<float>(c.rms_norm_eps);
    for (int32_t id : ids)
        if (id < 0 || id >= c.vocab_size)
            throw_usage("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(c.vocab_size) + ")");
    const at::Tensor index = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong);
    at::Tensor h = m.embed(index);
    if (m.embed_scale_ != 1.f) h.mul_(m.embed_scale_);
    at::Tensor x = at::empty({rows, hidden}, at::kFloat);
    at::Tensor attn = at::empty({rows, qdim}, at::kFloat);
    at::Tensor act = at::empty({rows, c.intermediate_size}, at::kFloat);
    AttentionShape shape{c.num_heads, c.num_kv_heads, hd, 0, static_cast<float>(c.attention_scale),
                         static_cast<float>(c.attn_softcap)};
    // longrope: a call reaching past the original positions rotates all its rows by the long
    // factors (rows cached earlier keep theirs), as Hugging Face's runs do.
    int64_t last_pos = 0;
    for (int64_t p : pos_) last_pos = std::max(last_pos, p);
    const bool long_rope = !cos_long_.empty() && last_pos + 1 > c.rope_scaling.original_max_position_embeddings;
    const std::vector<float> &cos_global = long_rope ? cos_long_ : cos_, &sin_global = long_rope ? sin_long_ : sin_;
    // dynamic: a call reaching past the original positions rotates its rows with a base grown
    // for its length (rows cached earlier keep theirs), as Hugging Face's runs do.
    std::vector<float> dynamic_cos, dynamic_sin;  // [rows][half]
    const RopeScaling &rs = c.rope_scaling;
    if (rs.type == "dynamic" && last_pos + 1 > rs.original_max_position_embeddings) {
        const double rot = static_cast<double>(c.rotary_dim);
        const double length = static_cast<double>(last_pos + 1);
        const double grown = rs.factor * length / static_cast<double>(rs.original_max_position_embeddings) - (rs.factor - 1);
        const double base = c.rope_theta * std::pow(grown, rot / (rot - 2));
        dynamic_cos.resize(static_cast<size_t>(rows * half));
        dynamic_sin.resize(dynamic_cos.size());
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < half; ++i) {
                const double inv = 1.0 / std::pow(base, static_cast<double>(2 * i) / rot);
                const float angle = static_cast<float>(pos_[static_cast<size_t>(r)]) * static_cast<float>(inv);
                dynamic_cos[static_cast<size_t>(r * half + i)] = std::cos(angle);
                dynamic_sin[static_cast<size_t>(r * half + i)] = std::sin(angle);
            }
    }
    const at::ScalarType act_type = m.cache_type_ == kernels::CacheType::f32 ? at::kFloat : at::kBFloat16;

    const auto norm = [&](const at::Tensor &src, const at::Tensor &w) {
        at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
            kernels::rms_norm(src.data_ptr<float>() + r0 * hidden, w.data_ptr<float>(), x.data_ptr<float>() + r0 * hidden,
                              r1 - r0, hidden, eps);
        });
    };
    // h += delta (when the projection could not fuse it), then x = norm(h).
    const auto add_norm = [&](const at::Tensor &delta, const at::Tensor &w) {
        at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
            kernels::add_rms_norm(h.data_ptr<float>() + r0 * hidden, delta.data_ptr<float>() + r0 * hidden,
                                  w.data_ptr<float>(), x.data_ptr<float>() + r0 * hidden, r1 - r0, hidden, eps);
        });
    };
    // y = norm(y) in place (Gemma's norms of the attention and MLP outputs).
    const auto norm_in_place = [&](const at::Tensor &y, const at::Tensor &w) {
        at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
            float *data = y.data_ptr<float>() + r0 * hidden;
            kernels::rms_norm(data, w.data_ptr<float>(), data, r1 - r0, hidden, eps);
        });
    };
    norm(h, m.layers_[0].input_norm);
    for (size_t l = 0; l < m.layers_.size(); ++l) {
        const DecoderLayer &layer = m.layers_[l];
        const bool sliding = c.sliding(static_cast<int64_t>(l));
        shape.window = sliding ? c.sliding_window : 0;
        const bool local_rope = sliding && !cos_local_.empty();
        const std::vector<float> &cos_table = local_rope ? cos_local_ : cos_global;
        const std::vector<float> &sin_table = local_rope ? sin_local_ : sin_global;
        const at::Tensor qkv = layer.qkv.forward(x.to(act_type));
        float *qkv_data = qkv.data_ptr<float>();
        const int64_t ld = qkv.size(1);
        at::parallel_for(0, rows, 4, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                float *row = qkv_data + r * ld;
                const size_t p = static_cast<size_t>(pos_[static_cast<size_t>(r)]);
                const bool dynamic = !dynamic_cos.empty() && !local_rope;
                const float *cs = dynamic ? dynamic_cos.data() + r * half : cos_table.data() + p * static_cast<size_t>(half);
                const float *sn = dynamic ? dynamic_sin.data() + r * half : sin_table.data() + p * static_cast<size_t>(half);
                if (c.qk_norm_full) {  // the whole q and k projections normalized, before the rotation
                    kernels::rms_norm(row, layer.q_norm.data_ptr<float>(), row, 1, qdim, eps);
                    kernels::rms_norm(row + qdim, layer.k_norm.data_ptr<float>(), row + qdim, 1, kvdim, eps);
                }
                if (c.qk_norm) {  // each head's q and k normalized on its own, before the rotation
                    kernels::rms_norm(row, layer.q_norm.data_ptr<float>(), row, c.num_heads, hd, eps);
                    kernels::rms_norm(row + qdim, layer.k_norm.data_ptr<float>(), row + qdim, c.num_kv_heads, hd, eps);
                }
                kernels::rope_row(row, c.num_heads, hd, c.rotary_dim, cs, sn);
                kernels::rope_row(row + qdim, c.num_kv_heads, hd, c.rotary_dim, cs, sn);
                cache_.write(static_cast<int64_t>(l), seq_[static_cast<size_t>(r)], static_cast<int64_t>(p), row + qdim,
                             row + qdim + kvdim);
            }
        });
        if (decode_step) {
            std::vector<int64_t> lengths(static_cast<size_t>(rows));
            for (int64_t r = 0; r < rows; ++r) lengths[static_cast<size_t>(r)] = pos_[static_cast<size_t>(r)] + 1;
            decode_attention(cache_, static_cast<int64_t>(l), shape, qkv_data, ld, lengths.data(), rows,
                             attn.data_ptr<float>(), qdim);
        } else {
            for (int64_t r0 = 0; r0 < rows;) {  // one segment per sequence
                int64_t r1 = r0 + 1;
                while (r1 < rows && seq_[static_cast<size_t>(r1)] == seq_[static_cast<size_t>(r0)]) ++r1;
                prefill_attention(cache_, static_cast<int64_t>(l), shape, qkv_data + r0 * ld, ld,
                                  seq_[static_cast<size_t>(r0)], pos_[static_cast<size_t>(r0)], r1 - r0,
                                  attn.data_ptr<float>() + r0 * qdim, qdim);
                r0 = r1;
            }
        }
        if (layer.attn_out_norm.defined()) {
            const at::Tensor delta = layer.o.forward(attn.to(act_type)).contiguous();
            norm_in_place(delta, layer.attn_out_norm);
            add_norm(delta, layer.post_norm);
        } else if (layer.o.fuses_residual()) {
            h = layer.o.forward_add(attn.to(act_type), h);
            norm(h, layer.post_norm);
        } else {
            add_norm(layer.o.forward(attn), layer.post_norm);
        }
        const at::Tensor &next_norm = l + 1 < m.layers_.size() ? m.layers_[l + 1].input_norm : m.final_norm_;
        if (layer.experts) {
            add_norm(run_experts(*layer.experts, c, x, act_type), next_norm);
            continue;
        }
        layer.gate_up.forward_glu(x.to(act_type), act, c.gelu_mlp);
        if (layer.mlp_out_norm.defined()) {
            const at::Tensor delta = layer.down.forward(act.to(act_type)).contiguous();
            norm_in_place(delta, layer.mlp_out_norm);
            add_norm(delta, next_norm);
        } else if (layer.down.fuses_residual()) {
            h = layer.down.forward_add(act.to(act_type), h);
            norm(h, next_norm);
        } else {
            add_norm(layer.down.forward(act), next_norm);
        }
    }
    for (int64_t r = 0; r < rows; ++r) {
        const size_t s = static_cast<size_t>(seq_[static_cast<size_t>(r)]);
        lengths_[s] = std::max(lengths_[s], pos_[static_cast<size_t>(r)] + 1);
    }
    // lm_head for the rows asked for only (the last position of each prompt in prefill).
    const bool all = static_cast<int64_t>(logits_rows.size()) == rows;
    const at::Tensor last =
        all ? x : x.index_select(0, at::tensor(std::vector<int64_t>(logits_rows.begin(), logits_rows.end()), at::kLong));
    logits_ = m.lm_head_.forward(last.to(act_type)).contiguous();
    if (c.final_softcap > 0) kernels::softcap(logits_.data_ptr<float>(), logits_.numel(), 1.f, static_cast<float>(c.final_softcap));
    Logits out;
    out.data = logits_.data_ptr<float>();
    out.rows = logits_.size(0);
    out.vocab = logits_.size(1);
    return out;
}

int32_t argmax(const float *logits, int64_t vocab) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
        if (logits[i] > logits[best]) best = i;
    return static_cast<int32_t>(best);
}

}  // namespace ipex::llm
