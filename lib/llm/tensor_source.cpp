#include "llm/tensor_source.h"

#include <ATen/ATen.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "base/errors.h"
#include "checkpoint/gguf.h"
#include "checkpoint/safetensors.h"

namespace ipex::llm {
namespace {

class Safetensors final : public TensorSource {
public:
    explicit Safetensors(const std::string &path) : ck_(path) {}
    bool has(const std::string &name) const override { return ck_.has(name); }
    std::vector<int64_t> shape(const std::string &name) const override { return ck_.info(name).shape; }
    std::string dtype(const std::string &name) const override { return ck_.info(name).dtype; }
    bool readable(const std::string &name) const override {
        const at::ScalarType t = ck_.info(name).type;
        return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
    }
    at::Tensor tensor(const std::string &name) const override { return ck_.tensor(name); }

private:
    woq::Checkpoint ck_;
};

// GGUF architectures and the Hugging Face class each maps to.
const std::map<std::string, std::string> &gguf_architectures() {
    static const std::map<std::string, std::string> m = {
        {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}};
    return m;
}

// Tensor names: Hugging Face's beside GGUF's, outside the layers and (without "blk.N.") inside.
const std::vector<std::pair<std::string, std::string>> &top_names() {
    static const std::vector<std::pair<std::string, std::string>> t = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                                       {"model.norm.weight", "output_norm.weight"},
                                                                       {"lm_head.weight", "output.weight"}};
    return t;
}
const std::vector<std::pair<std::string, std::string>> &layer_names() {
    static const std::vector<std::pair<std::string, std::string>> t = {
        {"input_layernorm", "attn_norm"},   {"post_attention_layernorm", "ffn_norm"},
        {"self_attn.q_proj", "attn_q"},     {"self_attn.k_proj", "attn_k"},
        {"self_attn.v_proj", "attn_v"},     {"self_attn.o_proj", "attn_output"},
        {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
        {"mlp.gate_proj", "ffn_gate"},      {"mlp.up_proj", "ffn_up"},
        {"mlp.down_proj", "ffn_down"}};
    return t;
}

// The GGUF name of a Hugging Face tensor name ("" for none).
std::string gguf_name(const std::string &hf) {
    for (const auto &[h, g] : top_names())
        if (h == hf) return g;
    static const std::string prefix = "model.layers.";
    if (hf.rfind(prefix, 0) != 0) return "";
    const size_t dot = hf.find('.', prefix.size());
    if (dot == std::string::npos) return "";
    const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
    const std::string rest = hf.substr(dot + 1);  // "self_attn.q_proj.weight"
    const size_t last = rest.rfind('.');
    if (last == std::string::npos) return "";
    for (const auto &[h, g] : layer_names())
        if (h == rest.substr(0, last)) return "blk." + layer + "." + g + rest.substr(last);
    return "";
}

// The Hugging Face name of a GGUF tensor name ("" for none).
std::string hf_name(const std::string &gguf) {
    for (const auto &[h, g] : top_names())
        if (g == gguf) return h;
    static const std::string prefix = "blk.";
    if (gguf.rfind(prefix, 0) != 0) return "";
    const size_t dot = gguf.find('.', prefix.size());
    const size_t last = gguf.rfind('.');
    if (dot == std::string::npos || last <= dot) return "";
    const std::string part = gguf.substr(dot + 1, last - dot - 1);
    for (const auto &[h, g] : layer_names())
        if (g == part) return "model.layers." + gguf.substr(prefix.size(), dot - prefix.size()) + "." + h + gguf.substr(last);
    return "";
}

class Gguf final : public TensorSource {
public:
    explicit Gguf(const std::string &path) : file_(path) {
        const auto &md = file_.metadata();
        arch_ = md.value("general.architecture", std::string());
        if (arch_ == "llama") {  // llama.cpp's converter interleaves q/k rows for this architecture
            heads_ = md.value("llama.attention.head_count", int64_t(0));
            kv_heads_ = md.value("llama.attention.head_count_kv", heads_);
        }
    }
    bool has(const std::string &name) const override { return info(name) != nullptr; }
    std::vector<int64_t> shape(const std::string &name) const override { return info(name)->shape; }
    std::string dtype(const std::string &name) const override { return woq::ggml_type_name(info(name)->type); }
    bool readable(const std::string &name) const override {
        using T = woq::GgmlType;
        switch (static_cast<T>(info(name)->type)) {
        case T::f32: case T::f16: case T::bf16: case T::q8_0: case T::q4_0: case T::q4_1: case T::q5_0:
        case T::q5_1: case T::q4_k: case T::q5_k: case T::q6_k: return true;
        default: return false;
        }
    }
    at::Tensor tensor(const std::string &name) const override {
        at::Tensor t = file_.tensor(gguf_name(name));
        const bool q = name.find("self_attn.q_proj.weight") != std::string::npos;
        const bool k = name.find("self_attn.k_proj.weight") != std::string::npos;
        if ((q || k) && heads_ > 0) {  // rows (head, pair, 2) back to (head, 2, half)
            const int64_t heads = q ? heads_ : kv_heads_, out = t.size(0), in = t.size(1);
            if (heads <= 0 || out % (2 * heads) != 0)
                throw_bad_input("GGUF file '" + file_.path() + "': '" + gguf_name(name) + "' has " + std::to_string(out) +
                                " rows, not whole pairs of " + std::to_string(heads) + " heads");
            t = t.reshape({heads, out / heads / 2, 2, in}).transpose(1, 2).reshape({out, in}).contiguous();
        }
        return t;
    }

private:
    const woq::GgufTensorInfo *info(const std::string &name) const {
        const std::string g = gguf_name(name);
        return g.empty() ? nullptr : file_.find(g);
    }
    woq::GgufFile file_;
    std::string arch_;
    int64_t heads_ = 0, kv_heads_ = 0;
};

// A metadata number by key, or `fallback`.
template <class T>
T number(const nlohmann::json &md, const std::string &key, T fallback) {
    const auto it = md.find(key);
    return it != md.end() && it->is_number() ? it->get<T>() : fallback;
}

}  // namespace

std::unique_ptr<TensorSource> safetensors_source(const std::string &path) { return std::make_unique<Safetensors>(path); }

bool is_gguf(const std::string &path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

std::unique_ptr<TensorSource> gguf_source(const std::string &path) { return std::make_unique<Gguf>(path); }

std::vector<std::string> gguf_tensor_names(const std::string &path) {
    const woq::GgufFile file(path);
    std::vector<std::string> names;
    for (const auto &t : file.header().tensors) {
        if (t.name == "rope_freqs.weight") continue;  // derived from the config's rope scaling
        const std::string hf = hf_name(t.name);
        if (hf.empty() || gguf_name(hf) != t.name)
            throw_unsupported("GGUF file '" + path + "': tensor '" + t.name + "' has no Hugging Face name this loader knows");
        names.push_back(hf);
    }
    return names;
}

nlohmann::json gguf_config(const std::string &path) {
    const woq::GgufFile file(path);
    const nlohmann::json &md = file.metadata();
    const std::string arch = md.value("general.architecture", std::string());
    const auto known = gguf_architectures().find(arch);
    if (known == gguf_architectures().end()) {
        std::string list;
        for (const auto &[a, hf] : gguf_architectures()) list += (list.empty() ? "" : ", ") + a;
        throw_unsupported("GGUF file '" + path + "': architecture '" + arch + "' is not supported (supported: " + list +
                          ")");
    }
    const std::string p = arch + ".";
    nlohmann::json c = {{"architectures", {known->second}}};
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
    if (md.value(p + "rope.scaling.type", std::string()) == "linear")
        c["rope_scaling"] = {{"type", "linear"}, {"factor", number<double>(md, p + "rope.scaling.factor", 1.0)}};
    else if (md.contains(p + "rope.scaling.type") && md[p + "rope.scaling.type"] != "none")
        throw_unsupported("GGUF file '" + path + "': rope scaling " +
                          (md[p + "rope.scaling.type"].is_string() ? "'" + md[p + "rope.scaling.type"].get<std::string>() + "'"
                                                                   : std::string("of a non-string type")) +
                          " is not supported (supported: linear, none)");
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
