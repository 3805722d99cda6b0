#include "llm/gguf_names.h"

#include <map>
#include <utility>

#include "base/errors.h"

namespace ipex::llm {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;  // Hugging Face part, GGUF part

// An expert's tensor: Hugging Face's "<block>experts.<e>.<leaf>" in the GGUF stack `gguf`.
struct ExpertPart {
    std::string block, leaf, gguf;
};

struct Table {
    Pairs layer;                       // "self_attn.q_proj" <-> "attn_q" (".weight" / ".bias" kept)
    std::vector<ExpertPart> experts;  // empty for dense architectures
};

const Pairs &top_names() {
    static const Pairs t = {{"model.embed_tokens.weight", "token_embd.weight"},
                            {"model.norm.weight", "output_norm.weight"},
                            {"lm_head.weight", "output.weight"}};
    return t;
}

Table make_table(const std::string &arch) {
    const bool gemma = arch == "gemma2" || arch == "gemma3";
    const bool phi3 = arch == "phi3";
    Table t;
    t.layer = {{"input_layernorm", "attn_norm"}};
    if (gemma)  // norms after attention and after the MLP, and the MLP's own input norm
        t.layer.insert(t.layer.end(), {{"post_attention_layernorm", "post_attention_norm"},
                                       {"pre_feedforward_layernorm", "ffn_norm"},
                                       {"post_feedforward_layernorm", "post_ffw_norm"}});
    else
        t.layer.push_back({"post_attention_layernorm", "ffn_norm"});
    if (phi3) {  // fused q | k | v and gate | up, as Hugging Face stores them
        t.layer.insert(t.layer.end(), {{"self_attn.qkv_proj", "attn_qkv"}, {"self_attn.o_proj", "attn_output"},
                                       {"mlp.gate_up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"}});
        return t;
    }
    t.layer.insert(t.layer.end(), {{"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
                                   {"self_attn.v_proj", "attn_v"}, {"self_attn.o_proj", "attn_output"},
                                   {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
                                   {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"}});
    if (arch == "llama") {  // Mixtral: the llama architecture with expert_count
        t.layer.push_back({"block_sparse_moe.gate", "ffn_gate_inp"});
        t.experts = {{"block_sparse_moe.", "w1", "ffn_gate_exps"},
                     {"block_sparse_moe.", "w3", "ffn_up_exps"},
                     {"block_sparse_moe.", "w2", "ffn_down_exps"}};
    } else if (arch == "qwen2moe" || arch == "qwen3moe") {
        t.layer.push_back({"mlp.gate", "ffn_gate_inp"});
        t.experts = {{"mlp.", "gate_proj", "ffn_gate_exps"},
                     {"mlp.", "up_proj", "ffn_up_exps"},
                     {"mlp.", "down_proj", "ffn_down_exps"}};
        if (arch == "qwen2moe")
            t.layer.insert(t.layer.end(), {{"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
                                           {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
                                           {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
                                           {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"}});
    }
    return t;
}

const Table &table(const std::string &arch) {
    static const std::map<std::string, Table> tables = [] {
        std::map<std::string, Table> m;
        for (const char *a : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen2moe", "qwen3moe"})
            m[a] = make_table(a);
        return m;
    }();
    static const Table none = make_table("");
    const auto it = tables.find(arch);
    return it == tables.end() ? none : it->second;
}

bool all_digits(const std::string &s) {
    if (s.empty() || s.size() > 6) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

}  // namespace

std::string gguf_hf_architecture(const nlohmann::json &md, const std::string &path) {
    static const std::vector<std::pair<std::string, std::string>> known = {
        {"llama", "LlamaForCausalLM"},     {"qwen2", "Qwen2ForCausalLM"},       {"qwen3", "Qwen3ForCausalLM"},
        {"gemma2", "Gemma2ForCausalLM"},   {"gemma3", "Gemma3ForCausalLM"},     {"phi3", "Phi3ForCausalLM"},
        {"qwen2moe", "Qwen2MoeForCausalLM"}, {"qwen3moe", "Qwen3MoeForCausalLM"}};
    const auto a = md.find("general.architecture");
    const std::string arch = a != md.end() && a->is_string() ? a->get<std::string>() : "";
    for (const auto &[g, hf] : known) {
        if (g != arch) continue;
        const auto experts = md.find(arch + ".expert_count");
        const bool moe = experts != md.end() && experts->is_number_integer() && experts->get<int64_t>() > 0;
        return arch == "llama" && moe ? "MixtralForCausalLM" : hf;
    }
    std::string list;
    for (const auto &[g, hf] : known) list += (list.empty() ? "" : ", ") + g;
    throw_unsupported("GGUF file '" + path + "': architecture '" + arch + "' is not supported (supported: " + list +
                      "; llama with expert_count is Mixtral)");
}

GgufSlot gguf_slot(const std::string &arch, const std::string &hf) {
    for (const auto &[h, g] : top_names())
        if (h == hf) return {g, -1};
    static const std::string prefix = "model.layers.";
    if (hf.rfind(prefix, 0) != 0) return {};
    const size_t dot = hf.find('.', prefix.size());
    const size_t last = hf.rfind('.');
    if (dot == std::string::npos || last <= dot) return {};
    const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
    if (!all_digits(layer)) return {};
    const std::string module = hf.substr(dot + 1, last - dot - 1);  // "self_attn.q_proj"
    const std::string leaf = hf.substr(last);                        // ".weight"
    const Table &t = table(arch);
    for (const auto &[h, g] : t.layer)
        if (h == module) return {"blk." + layer + "." + g + leaf, -1};
    if (leaf != ".weight") return {};
    for (const ExpertPart &x : t.experts) {
        const std::string head = x.block + "experts.";
        if (module.rfind(head, 0) != 0) continue;
        const size_t cut = module.find('.', head.size());
        if (cut == std::string::npos || module.substr(cut + 1) != x.leaf) continue;
        const std::string e = module.substr(head.size(), cut - head.size());
        if (!all_digits(e)) continue;
        return {"blk." + layer + "." + x.gguf + leaf, std::stoll(e)};
    }
    return {};
}

std::vector<std::string> gguf_hf_names(const std::string &arch, const std::string &gguf, int64_t experts) {
    for (const auto &[h, g] : top_names())
        if (g == gguf) return {h};
    static const std::string prefix = "blk.";
    if (gguf.rfind(prefix, 0) != 0) return {};
    const size_t dot = gguf.find('.', prefix.size());
    const size_t last = gguf.rfind('.');
    if (dot == std::string::npos || last <= dot) return {};
    const std::string layer = gguf.substr(prefix.size(), dot - prefix.size());
    if (!all_digits(layer)) return {};
    const std::string part = gguf.substr(dot + 1, last - dot - 1);
    const std::string leaf = gguf.substr(last);
    const std::string p = "model.layers." + layer + ".";
    const Table &t = table(arch);
    for (const auto &[h, g] : t.layer)
        if (g == part) return {p + h + leaf};
    std::vector<std::string> names;
    for (const ExpertPart &x : t.experts)
        if (x.gguf == part && leaf == ".weight")
            for (int64_t e = 0; e < experts; ++e)
                names.push_back(p + x.block + "experts." + std::to_string(e) + "." + x.leaf + leaf);
    return names;
}

bool is_expert_stack(const std::string &gguf) {
    for (const char *part : {".ffn_gate_exps.weight", ".ffn_up_exps.weight", ".ffn_down_exps.weight"}) {
        const std::string s = part;
        if (gguf.size() > s.size() && gguf.compare(gguf.size() - s.size(), s.size(), s) == 0) return true;
    }
    return false;
}

bool is_rope_table(const std::string &gguf) {
    return gguf == "rope_freqs.weight" || gguf == "rope_factors_long.weight" || gguf == "rope_factors_short.weight";
}

}  // namespace ipex::llm
