// A GGUF file's metadata as a Hugging Face config.json object, by llama.cpp's conversion rules
// read backwards. Where llama.cpp fixes a value instead of storing it, the value it uses is
// written: Gemma's attention scale (head_dim^-0.5; (hidden / heads)^-0.5 for the 27B layer
// counts), Gemma 2's sliding even layers, Gemma 3's five sliding layers in six with rotary base
// 10000, Qwen2-MoE's unnormalized and Qwen3-MoE's renormalized expert weights.
#include <ATen/ATen.h>

#include <cmath>

#include "base/errors.h"
#include "checkpoint/gguf.h"
#include "llm/gguf_names.h"
#include "llm/tensor_source.h"

namespace ipex::llm {
namespace {

// A metadata number by key, or `fallback`.
template <class T>
T number(const nlohmann::json &md, const std::string &key, T fallback) {
    const auto it = md.find(key);
    return it != md.end() && it->is_number() ? it->get<T>() : fallback;
}

// Phi-3's longrope: the factor lists llama.cpp keeps as tensors, the original length and the
// attention factor (stated only when it differs from the one Hugging Face derives).
nlohmann::json longrope(const woq::GgufFile &file, const std::string &p, int64_t max_positions) {
    const auto &md = file.metadata();
    const auto *long_t = file.find("rope_factors_long.weight");
    const auto *short_t = file.find("rope_factors_short.weight");
    if (!long_t || !short_t)
        throw_bad_input("GGUF file '" + file.path() + "': tensor '" +
                        std::string(long_t ? "rope_factors_short.weight" : "rope_factors_long.weight") +
                        "' is missing (its pair is there: longrope needs both)");
    const std::string orig_key = p + "rope.scaling.original_context_length";
    const int64_t original = number<int64_t>(md, orig_key, 0);
    if (original <= 0)
        throw_bad_input("GGUF file '" + file.path() + "': '" + orig_key + "' is missing (longrope needs it)");
    nlohmann::json r = {{"rope_type", "longrope"}, {"original_max_position_embeddings", original}};
    for (const auto &[key, name] : {std::pair{"long_factor", "rope_factors_long.weight"},
                                    std::pair{"short_factor", "rope_factors_short.weight"}}) {
        const at::Tensor t = file.tensor(name).to(at::kFloat).reshape({-1});
        std::vector<double> v(static_cast<size_t>(t.numel()));
        for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t[i].item<float>();
        r[key] = v;
    }
    const double scale = static_cast<double>(max_positions) / static_cast<double>(original);
    const double derived = scale <= 1 ? 1.0 : std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(original)));
    const double stated = number<double>(md, p + "rope.scaling.attn_factor", derived);
    if (std::abs(stated - derived) > 1e-6 * derived) r["attention_factor"] = stated;
    return r;
}

// Mixture-of-experts fields: counts, sizes, renormalization, and the dense layers (no router).
void set_experts(nlohmann::json &c, const woq::GgufFile &file, const std::string &arch) {
    const auto &md = file.metadata();
    const std::string p = arch + ".";
    const int64_t experts = number<int64_t>(md, p + "expert_count", 0);
    if (experts <= 0) {
        if (arch == "llama") return;
        throw_bad_input("GGUF file '" + file.path() + "': '" + p + "expert_count' is missing (" + arch +
                        " is a mixture of experts)");
    }
    const int64_t used = number<int64_t>(md, p + "expert_used_count", 0);
    if (used <= 0 || used > experts)
        throw_bad_input("GGUF file '" + file.path() + "': '" + p + "expert_used_count' must be 1 to " +
                        std::to_string(experts) + " ('" + p + "expert_count')");
    c["num_experts_per_tok"] = used;
    const int64_t expert_ff = number<int64_t>(md, p + "expert_feed_forward_length", 0);
    if (arch == "llama") {  // Mixtral: experts of intermediate_size, always renormalized
        c["num_local_experts"] = experts;
        if (expert_ff > 0) c["intermediate_size"] = expert_ff;
        return;
    }
    if (expert_ff <= 0)
        throw_bad_input("GGUF file '" + file.path() + "': '" + p + "expert_feed_forward_length' is missing");
    c["num_experts"] = experts;
    c["moe_intermediate_size"] = expert_ff;
    if (!c.contains("intermediate_size")) c["intermediate_size"] = expert_ff;
    c["norm_topk_prob"] = arch == "qwen3moe";  // llama.cpp: qwen2moe leaves the weights as chosen
    if (arch == "qwen2moe")
        c["shared_expert_intermediate_size"] = number<int64_t>(md, p + "expert_shared_feed_forward_length", 0);
    c["decoder_sparse_step"] = 1;
    nlohmann::json dense = nlohmann::json::array();
    const int64_t layers = number<int64_t>(md, p + "block_count", 0);
    for (int64_t l = 0; l < layers; ++l)
        if (!file.find("blk." + std::to_string(l) + ".ffn_gate_inp.weight")) dense.push_back(l);
    if (!dense.empty()) c["mlp_only_layers"] = dense;
}

// Gemma 2 and 3: gelu MLP, the attention scale and soft caps, sliding layers, Gemma 3's local base.
void set_gemma(nlohmann::json &c, const nlohmann::json &md, const std::string &arch) {
    const std::string p = arch + ".";
    c["hidden_activation"] = "gelu_pytorch_tanh";
    const int64_t layers = number<int64_t>(md, p + "block_count", 0);
    const int64_t heads = number<int64_t>(md, p + "attention.head_count", 0);
    const int64_t hidden = number<int64_t>(md, p + "embedding_length", 0);
    const int64_t head_dim = number<int64_t>(md, p + "attention.key_length", heads > 0 ? hidden / heads : 0);
    const bool large = layers == (arch == "gemma2" ? 46 : 62);  // llama.cpp's 27B rule
    c["query_pre_attn_scalar"] = large && heads > 0 ? hidden / heads : head_dim;
    if (md.contains(p + "attn_logit_softcapping")) c["attn_logit_softcapping"] = md[p + "attn_logit_softcapping"];
    if (md.contains(p + "final_logit_softcapping")) c["final_logit_softcapping"] = md[p + "final_logit_softcapping"];
    const int64_t window = number<int64_t>(md, p + "attention.sliding_window", 0);
    if (window > 0) c["sliding_window"] = window;
    if (arch == "gemma3") {
        c["sliding_window_pattern"] = window > 0 ? 6 : 1;
        c["rope_local_base_freq"] = 10000.0;
    }
}

}  // namespace

nlohmann::json gguf_config(const std::string &path) {
    const woq::GgufFile file(path);
    const nlohmann::json &md = file.metadata();
    const std::string hf_class = gguf_hf_architecture(md, path);
    const std::string arch = md.value("general.architecture", std::string());
    const std::string p = arch + ".";
    nlohmann::json c = {{"architectures", {hf_class}}};
    const auto copy = [&](const char *gguf_key, const char *hf_key) {
        if (md.contains(p + gguf_key) && md[p + gguf_key].is_number()) c[hf_key] = md[p + gguf_key];
    };
    copy("embedding_length", "hidden_size");
    copy("feed_forward_length", "intermediate_size");
    copy("block_count", "num_hidden_layers");
    copy("attention.head_count", "num_attention_heads");
    copy("attention.head_count_kv", "num_key_value_heads");
    copy("attention.key_length", "head_dim");
    copy("context_length", "max_position_embeddings");
    copy("attention.layer_norm_rms_epsilon", "rms_norm_eps");
    copy("rope.freq_base", "rope_theta");
    const int64_t heads = number<int64_t>(md, p + "attention.head_count", 0);
    const int64_t hidden = number<int64_t>(md, p + "embedding_length", 0);
    const int64_t head_dim = number<int64_t>(md, p + "attention.key_length", heads > 0 ? hidden / heads : 0);
    const int64_t rotary = number<int64_t>(md, p + "rope.dimension_count", head_dim);
    if (head_dim > 0 && rotary > 0 && rotary != head_dim)
        c["partial_rotary_factor"] = static_cast<double>(rotary) / static_cast<double>(head_dim);
    if (md.contains(p + "rope.scaling.type") && !md[p + "rope.scaling.type"].is_string())
        throw_bad_input("GGUF file '" + path + "': '" + p + "rope.scaling.type' is not a string");
    const std::string scaling = md.value(p + "rope.scaling.type", std::string("none"));
    const bool factors = file.find("rope_factors_long.weight") || file.find("rope_factors_short.weight");
    if (scaling == "linear") {
        c["rope_scaling"] = {{"type", "linear"}, {"factor", number<double>(md, p + "rope.scaling.factor", 1.0)}};
    } else if (arch == "phi3" && (factors || scaling == "longrope")) {
        c["rope_scaling"] = longrope(file, p, number<int64_t>(md, p + "context_length", 0));
        c["original_max_position_embeddings"] = c["rope_scaling"]["original_max_position_embeddings"];
    } else if (scaling != "none") {
        throw_unsupported("GGUF file '" + path + "': rope scaling '" + scaling + "' is not supported (supported: linear, " +
                          "none; Phi-3's longrope)");
    }
    if (arch == "phi3" && number<int64_t>(md, p + "attention.sliding_window", 0) > 0)
        c["sliding_window"] = md[p + "attention.sliding_window"];
    if (arch == "gemma2" || arch == "gemma3") set_gemma(c, md, arch);
    if (arch == "llama" || arch == "qwen2moe" || arch == "qwen3moe") set_experts(c, file, arch);
    if (number<int64_t>(md, p + "expert_count", 0) > 0 && arch != "llama" && arch != "qwen2moe" && arch != "qwen3moe")
        throw_unsupported("GGUF file '" + path + "': '" + p + "expert_count' on the " + arch +
                          " architecture is not supported (mixtures of experts: llama (Mixtral), qwen2moe, qwen3moe)");
    const auto *embed = file.find("token_embd.weight");
    if (md.contains("tokenizer.ggml.tokens") && md["tokenizer.ggml.tokens"].is_array())
        c["vocab_size"] = md["tokenizer.ggml.tokens"].size();
    else if (embed)
        c["vocab_size"] = embed->shape[0];
    c["tie_word_embeddings"] = file.find("output.weight") == nullptr;
    if (md.contains("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = md["tokenizer.ggml.bos_token_id"];
    if (md.contains("tokenizer.ggml.eos_token_id")) c["eos_token_id"] = md["tokenizer.ggml.eos_token_id"];
    return c;
}

}  // namespace ipex::llm
