#include "llm/config.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cmath>

#include "base/bounded_file.h"
#include "base/errors.h"
#include "base/json_io.h"
#include "llm/tensor_source.h"

namespace ipex::llm {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string &source, const std::string &what) {
    throw_bad_input("'" + source + "': " + what);
}

json parse_object(const std::string &text, const std::string &source) {
    return ipex::parse_json_object(text, source);
}

// An integer field in [lo, hi]; `fallback` when absent or null (required when fallback < lo).
int64_t int_field(const json &j, const char *name, int64_t lo, int64_t hi, int64_t fallback,
                  const std::string &source) {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
        if (fallback < lo) fail(source, std::string("field '") + name + "' is missing");
        return fallback;
    }
    if (!it->is_number_integer()) fail(source, std::string("field '") + name + "' must be an integer");
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi)
        fail(source, std::string("field '") + name + "' = " + std::to_string(v) + " is out of range [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
}

double number_field(const json &j, const char *name, double lo, double hi, double fallback, const std::string &source) {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number()) fail(source, std::string("field '") + name + "' must be a number");
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi)
        fail(source, std::string("field '") + name + "' = " + std::to_string(v) + " is out of range");
    return v;
}

bool bool_field(const json &j, const char *name, bool fallback, const std::string &source) {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(source, std::string("field '") + name + "' must be true or false");
    return it->get<bool>();
}

std::string string_field(const json &j, const char *name, const std::string &source) {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) return "";
    if (!it->is_string()) fail(source, std::string("field '") + name + "' must be a string");
    return it->get<std::string>();
}

// eos_token_id: an integer or a list of integers.
std::vector<int64_t> id_list(const json &j, const char *name, const std::string &source) {
    std::vector<int64_t> ids;
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) return ids;
    const auto one = [&](const json &v) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxVocab)
            fail(source, std::string("field '") + name + "' must be a token id or a list of token ids");
        ids.push_back(v.get<int64_t>());
    };
    if (it->is_array()) {
        if (it->size() > 64) fail(source, std::string("field '") + name + "' lists more than 64 ids");
        for (const auto &v : *it) one(v);
    } else {
        one(*it);
    }
    return ids;
}

std::string family_of(const std::string &architecture) {
    if (architecture == "LlamaForCausalLM") return "llama";
    if (architecture == "MistralForCausalLM") return "mistral";
    if (architecture == "Qwen2ForCausalLM") return "qwen2";
    if (architecture == "Qwen3ForCausalLM") return "qwen3";
    if (architecture == "Phi3ForCausalLM") return "phi3";
    if (architecture == "Gemma2ForCausalLM") return "gemma2";
    if (architecture == "Gemma3ForCausalLM" || architecture == "Gemma3ForConditionalGeneration") return "gemma3";
    if (architecture == "MixtralForCausalLM") return "mixtral";
    if (architecture == "Qwen2MoeForCausalLM") return "qwen2_moe";
    if (architecture == "Qwen3MoeForCausalLM") return "qwen3_moe";
    if (architecture == "OlmoeForCausalLM") return "olmoe";
    return "";
}

// rope_scaling.short_factor / long_factor: a list of positive numbers.
std::vector<double> factor_list(const json &r, const char *name, const std::string &source) {
    const auto it = r.find(name);
    if (it == r.end() || !it->is_array() || it->empty() || it->size() > 1024)
        fail(source, std::string("field 'rope_scaling.") + name + "' must be a list of numbers (longrope)");
    std::vector<double> out;
    for (const auto &v : *it) {
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0 || v.get<double>() > 1e6)
            fail(source, std::string("field 'rope_scaling.") + name + "' must hold positive numbers");
        out.push_back(v.get<double>());
    }
    return out;
}

// longrope's original length (rope_scaling's, else the config's top-level field, as Phi-3
// writes it), its factor lists' length and the attention factor.
void set_longrope(ModelConfig &c, const json &j, const std::string &source) {
    RopeScaling &r = c.rope_scaling;
    if (r.original_max_position_embeddings == 0)
        r.original_max_position_embeddings =
            int_field(j, "original_max_position_embeddings", 1, kMaxPositions, c.max_position_embeddings, source);
    const size_t half = static_cast<size_t>(c.rotary_dim / 2);
    if (r.short_factor.size() != half || r.long_factor.size() != half)
        fail(source, "rope_scaling.short_factor and long_factor must each hold rotary_dim / 2 = " +
                         std::to_string(half) + " numbers");
    r.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(r.original_max_position_embeddings);
    if (r.attention_factor == 0)
        r.attention_factor = r.factor <= 1 ? 1.0
                                           : std::sqrt(1 + std::log(r.factor) /
                                                               std::log(static_cast<double>(r.original_max_position_embeddings)));
}

// Which layers attend within the sliding window: "layer_types" when stated (any family), else
// Gemma 2's even layers, Gemma 3's all but every sliding_window_pattern-th.
void set_sliding_layers(ModelConfig &c, const json &j, const std::string &source) {
    const auto types = j.find("layer_types");
    if (types != j.end() && !types->is_null()) {
        if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_layers)
            fail(source, "field 'layer_types' must list one type per layer (" + std::to_string(c.num_layers) + ")");
        for (const auto &t : *types) {
            if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
                fail(source, "field 'layer_types' holds a type other than sliding_attention or full_attention");
            c.sliding_layers.push_back(t == "sliding_attention");
        }
        return;
    }
    if (c.family == "gemma2") {
        for (int64_t l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back(l % 2 == 0);
    } else if (c.family == "gemma3") {
        const int64_t pattern = int_field(j, "sliding_window_pattern", 1, kMaxLayers, 6, source);
        for (int64_t l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back((l + 1) % pattern != 0);
    }
}

// The experts of a mixture-of-experts family, and which layers have them.
void set_experts(ModelConfig &c, const json &j, const std::string &source) {
    const bool mixtral = c.family == "mixtral";
    c.num_experts = int_field(j, mixtral ? "num_local_experts" : "num_experts", 1, 1 << 12, -1, source);
    c.experts_per_token = int_field(j, "num_experts_per_tok", 1, c.num_experts, -1, source);
    c.moe_intermediate_size = mixtral || c.family == "olmoe"
                                  ? c.intermediate_size
                                  : int_field(j, "moe_intermediate_size", 1, 4 * kMaxHidden, -1, source);
    if (c.family == "qwen2_moe")
        c.shared_expert_intermediate_size =
            int_field(j, "shared_expert_intermediate_size", 0, 4 * kMaxHidden, 0, source);
    c.norm_topk_prob = mixtral || bool_field(j, "norm_topk_prob", false, source);
    const int64_t step = mixtral || c.family == "olmoe" ? 1 : int_field(j, "decoder_sparse_step", 1, kMaxLayers, 1, source);
    c.sparse_layers.assign(static_cast<size_t>(c.num_layers), false);
    for (int64_t l = 0; l < c.num_layers; ++l) c.sparse_layers[static_cast<size_t>(l)] = (l + 1) % step == 0;
    const auto dense = j.find("mlp_only_layers");
    if (dense != j.end() && !dense->is_null()) {
        if (!dense->is_array()) fail(source, "field 'mlp_only_layers' must be a list of layer indices");
        for (const auto &v : *dense) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.num_layers)
                fail(source, "field 'mlp_only_layers' holds something other than a layer index");
            c.sparse_layers[static_cast<size_t>(v.get<int64_t>())] = false;
        }
    }
}

RopeScaling parse_rope_scaling(const json &j, const std::string &source) {
    RopeScaling r;
    const auto it = j.find("rope_scaling");
    if (it == j.end() || it->is_null()) return r;
    if (!it->is_object()) fail(source, "field 'rope_scaling' must be an object or null");
    std::string type = string_field(*it, "rope_type", source);
    if (type.empty()) type = string_field(*it, "type", source);
    if (type == "default" || type.empty()) return r;
    if (type == "su") type = "longrope";  // the name early Phi-3 configs use
    if (type != "llama3" && type != "linear" && type != "longrope" && type != "yarn" && type != "dynamic")
        throw_unsupported("'" + source + "': rope_scaling type '" + type +
                          "' is not supported (supported: llama3, linear, longrope, yarn, dynamic, default)");
    r.type = type;
    if (type == "longrope") {  // the factor is the ratio of the position counts (set_longrope)
        r.short_factor = factor_list(*it, "short_factor", source);
        r.long_factor = factor_list(*it, "long_factor", source);
        r.attention_factor = number_field(*it, "attention_factor", 1e-3, 1e3, 0, source);
        r.original_max_position_embeddings =
            int_field(*it, "original_max_position_embeddings", 0, kMaxPositions, 0, source);
        return r;
    }
    r.factor = number_field(*it, "factor", 1e-3, 1e6, -1, source);
    if (r.factor <= 0) fail(source, "field 'rope_scaling.factor' is missing");
    if (type == "yarn") {
        r.beta_fast = number_field(*it, "beta_fast", 1e-6, 1e6, 32, source);
        r.beta_slow = number_field(*it, "beta_slow", 1e-6, 1e6, 1, source);
        r.mscale = number_field(*it, "mscale", 0, 1e6, 0, source);
        r.mscale_all_dim = number_field(*it, "mscale_all_dim", 0, 1e6, 0, source);
        r.attention_factor = number_field(*it, "attention_factor", 1e-3, 1e3, 0, source);
        r.truncate = bool_field(*it, "truncate", true, source);
        if (r.beta_slow >= r.beta_fast) fail(source, "rope_scaling.beta_fast must exceed beta_slow");
        const auto mscale_of = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
        if (r.attention_factor == 0)
            r.attention_factor = r.mscale > 0 && r.mscale_all_dim > 0
                                     ? mscale_of(r.factor, r.mscale) / mscale_of(r.factor, r.mscale_all_dim)
                                     : mscale_of(r.factor, 1.0);
    }
    if (type == "llama3") {
        r.low_freq_factor = number_field(*it, "low_freq_factor", 1e-6, 1e6, 1.0, source);
        r.high_freq_factor = number_field(*it, "high_freq_factor", 1e-6, 1e6, 4.0, source);
        r.original_max_position_embeddings =
            int_field(*it, "original_max_position_embeddings", 1, kMaxPositions, 8192, source);
        if (r.high_freq_factor <= r.low_freq_factor)
            fail(source, "rope_scaling.high_freq_factor must exceed low_freq_factor");
    } else {
        r.original_max_position_embeddings =
            int_field(*it, "original_max_position_embeddings", 0, kMaxPositions, 0, source);
    }
    return r;
}

// ModelConfig::position_limit and its source (config.h says which figure counts).
void set_position_limit(ModelConfig &c, bool stated, const std::string &source) {
    const int64_t mpe = c.max_position_embeddings;
    const RopeScaling &r = c.rope_scaling;
    std::string what = "max_position_embeddings " + std::to_string(mpe);
    c.position_limit = mpe;
    const bool extended_already = r.original_max_position_embeddings > 0 && r.original_max_position_embeddings < mpe;
    if ((r.type == "linear" || r.type == "dynamic") && r.factor > 1 && !extended_already) {
        const double scaled = std::floor(static_cast<double>(mpe) * r.factor);
        c.position_limit = scaled >= static_cast<double>(kMaxPositions) ? kMaxPositions : static_cast<int64_t>(scaled);
        std::string factor = std::to_string(r.factor);  // "4.000000" -> "4"
        factor.erase(factor.find_last_not_of('0') + 1);
        if (factor.back() == '.') factor.pop_back();
        what += " x rope_scaling.factor " + factor + " (" + r.type + ") = " + std::to_string(c.position_limit);
    }
    c.position_limit_source = what + " (" + source + (stated ? "" : ", which does not state it: the default") + ")";
}

}  // namespace

const std::vector<std::string> &supported_architectures() {
    static const std::vector<std::string> list = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                                   "Qwen3ForCausalLM", "Phi3ForCausalLM", "Gemma2ForCausalLM",
                                                   "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
                                                   "MixtralForCausalLM", "Qwen2MoeForCausalLM",
                                                   "Qwen3MoeForCausalLM", "OlmoeForCausalLM"};
    return list;
}

namespace {

// Gemma3TextConfig's defaults: a multimodal checkpoint's text_config holds only the fields that
// differ from them (save_pretrained writes the difference).
const json &gemma3_text_defaults() {
    static const json d = {{"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                           {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                           {"head_dim", 256}, {"hidden_activation", "gelu_pytorch_tanh"},
                           {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6}, {"pad_token_id", 0},
                           {"eos_token_id", 1}, {"bos_token_id", 2}, {"tie_word_embeddings", true},
                           {"rope_theta", 1000000.0}, {"attention_bias", false}, {"query_pre_attn_scalar", 256},
                           {"sliding_window", 4096}, {"rope_local_base_freq", 10000.0},
                           {"sliding_window_pattern", 6}};
    return d;
}

// Gemma 3 as its image-text checkpoints ship (Gemma3ForConditionalGeneration): the decoder's
// fields under text_config over Gemma3TextConfig's defaults, the token ids and dtype of the top
// level where text_config has none. Only the text model runs (ModelConfig::text_of_multimodal).
json gemma3_text_config(const json &j, const std::string &source) {
    const auto text = j.find("text_config");
    if (text == j.end() || !text->is_object())
        fail(source, "field 'text_config' must be an object (the text model of Gemma3ForConditionalGeneration)");
    json merged = gemma3_text_defaults();
    for (const auto &[key, value] : text->items()) merged[key] = value;
    for (const char *key : {"eos_token_id", "bos_token_id", "pad_token_id", "torch_dtype"})
        if (!text->contains(key) && j.contains(key)) merged[key] = j[key];
    if (!text->contains("tie_word_embeddings") && j.contains("tie_word_embeddings"))
        merged["tie_word_embeddings"] = j["tie_word_embeddings"];
    merged["architectures"] = j["architectures"];
    return merged;
}

}  // namespace

ModelConfig parse_config(const std::string &text, const std::string &source) {
    json j = parse_object(text, source);
    ModelConfig c;
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
        j["architectures"][0] == "Gemma3ForConditionalGeneration") {
        j = gemma3_text_config(j, source);
        c.text_of_multimodal = true;
    }
    const auto arch = j.find("architectures");
    if (arch == j.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string())
        fail(source, "field 'architectures' must be a list naming the model class (e.g. [\"LlamaForCausalLM\"])");
    c.architecture = (*arch)[0].get<std::string>();
    c.family = family_of(c.architecture);
    if (c.family.empty()) {
        std::string list;
        for (const auto &a : supported_architectures()) list += (list.empty() ? "" : ", ") + a;
        throw_unsupported("'" + source + "': architecture '" + c.architecture + "' is not supported (supported: " +
                          list + ")");
    }
    c.hidden_size = int_field(j, "hidden_size", 1, kMaxHidden, -1, source);
    c.intermediate_size = int_field(j, "intermediate_size", 1, 4 * kMaxHidden, -1, source);
    c.num_layers = int_field(j, "num_hidden_layers", 1, kMaxLayers, -1, source);
    c.num_heads = int_field(j, "num_attention_heads", 1, kMaxHidden, -1, source);
    c.num_kv_heads = int_field(j, "num_key_value_heads", 1, kMaxHidden, c.num_heads, source);
    if (c.num_heads % c.num_kv_heads != 0)
        fail(source, "num_attention_heads (" + std::to_string(c.num_heads) +
                         ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) + ")");
    const int64_t default_head_dim = c.hidden_size % c.num_heads == 0 ? c.hidden_size / c.num_heads : -1;
    c.head_dim = int_field(j, "head_dim", 2, 1024, default_head_dim, source);
    if (c.head_dim % 2 != 0) fail(source, "head_dim must be even (rotary embedding)");
    const double partial = number_field(j, "partial_rotary_factor", 1e-6, 1, 1.0, source);
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
    if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0)
        fail(source, "head_dim x partial_rotary_factor = " + std::to_string(c.rotary_dim) +
                         " rotary channels: must be even and at least 2");
    c.vocab_size = int_field(j, "vocab_size", 1, kMaxVocab, -1, source);
    c.max_position_embeddings = int_field(j, "max_position_embeddings", 1, kMaxPositions, 2048, source);
    c.rms_norm_eps = number_field(j, "rms_norm_eps", 0, 1, 1e-6, source);
    c.rope_theta = number_field(j, "rope_theta", 1, 1e12, 10000.0, source);
    c.rope_scaling = parse_rope_scaling(j, source);
    if (c.rope_scaling.type == "longrope") set_longrope(c, j, source);
    if ((c.rope_scaling.type == "yarn" || c.rope_scaling.type == "dynamic") &&
        c.rope_scaling.original_max_position_embeddings == 0)
        c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
    set_position_limit(c, j.contains("max_position_embeddings") && !j["max_position_embeddings"].is_null(), source);
    c.tie_word_embeddings = bool_field(j, "tie_word_embeddings", false, source);
    if (c.family == "qwen2" || c.family == "qwen2_moe") {
        c.attention_bias = true;
    } else if (c.family == "llama" || c.family == "qwen3" || c.family == "qwen3_moe" || c.family == "olmoe") {
        c.attention_bias = bool_field(j, "attention_bias", false, source);
        c.o_bias = c.attention_bias;
        c.mlp_bias = bool_field(j, "mlp_bias", false, source);
    }
    c.fused_projections = c.family == "phi3";
    const bool gemma = c.family == "gemma2" || c.family == "gemma3";
    if (gemma) {
        c.attention_bias = bool_field(j, "attention_bias", false, source);
        c.o_bias = c.attention_bias;
        c.gemma_norms = true;
        c.tie_word_embeddings = bool_field(j, "tie_word_embeddings", true, source);
        c.attention_scale = 1.0 / std::sqrt(number_field(j, "query_pre_attn_scalar", 1e-6, 1e9,
                                                         static_cast<double>(c.head_dim), source));
        c.attn_softcap = number_field(j, "attn_logit_softcapping", 0, 1e6, 0, source);
        c.final_softcap = number_field(j, "final_logit_softcapping", 0, 1e6, 0, source);
        if (c.family == "gemma3") c.rope_local_theta = number_field(j, "rope_local_base_freq", 1, 1e12, 10000.0, source);
    }
    std::string act = string_field(j, "hidden_activation", source);
    if (act.empty()) act = string_field(j, "hidden_act", source);
    if (act.empty()) act = gemma ? "gelu_pytorch_tanh" : "silu";
    if (act != "silu" && act != "gelu_pytorch_tanh")
        throw_unsupported("'" + source + "': MLP activation '" + act + "' is not supported (supported: silu, "
                          "gelu_pytorch_tanh)");
    c.gelu_mlp = act == "gelu_pytorch_tanh";
    if (c.attention_scale == 0) c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    if (c.family == "mistral" || c.family == "mixtral" || c.family == "phi3" || gemma)
        c.sliding_window = int_field(j, "sliding_window", 0, kMaxPositions, 0, source);
    c.qk_norm = c.family == "qwen3" || c.family == "qwen3_moe" || c.family == "gemma3";
    c.qk_norm_full = c.family == "olmoe";
    if (c.family == "mixtral" || c.family == "qwen2_moe" || c.family == "qwen3_moe" || c.family == "olmoe")
        set_experts(c, j, source);
    if (c.family == "olmoe" && j.contains("clip_qkv") && !j["clip_qkv"].is_null())
        throw_unsupported("'" + source + "': clip_qkv is not supported");
    if ((c.family == "qwen2" || c.family == "qwen3" || c.family == "qwen2_moe" || c.family == "qwen3_moe") &&
        bool_field(j, "use_sliding_window", false, source))
        c.sliding_window = int_field(j, "sliding_window", 0, kMaxPositions, 0, source);
    set_sliding_layers(c, j, source);
    c.torch_dtype = string_field(j, "torch_dtype", source);
    c.bos_token_id = int_field(j, "bos_token_id", -1, c.vocab_size - 1, -1, source);
    c.eos_token_ids = id_list(j, "eos_token_id", source);
    for (int64_t id : c.eos_token_ids)
        if (id >= c.vocab_size) fail(source, "eos_token_id " + std::to_string(id) + " is not below vocab_size");
    c.pad_token_id = int_field(j, "pad_token_id", -1, c.vocab_size - 1, -1, source);
    c.quantized = j.contains("quantization_config") && !j["quantization_config"].is_null();
    return c;
}

ModelConfig read_config(const std::string &dir) {
    if (is_gguf(dir)) return parse_config(gguf_config(dir).dump(), dir + " (GGUF metadata)");
    const std::string path = dir + "/config.json";
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw_bad_input("'" + dir + "' is neither a directory nor a GGUF file (expected a Hugging Face model directory "
                        "or a .gguf file)");
    if (::stat(path.c_str(), &st) != 0)
        throw_bad_input("'" + dir + "' has no config.json (expected a Hugging Face model directory)");
    return parse_config(read_bounded_file(path, kMaxConfigBytes, "config.json"), path);
}

GenerationDefaults parse_generation_config(const std::string &text, const std::string &source) {
    const json j = parse_object(text, source);
    GenerationDefaults g;
    g.do_sample = bool_field(j, "do_sample", false, source);
    g.temperature = number_field(j, "temperature", 0, 1e6, 1.0, source);
    g.top_k = int_field(j, "top_k", 0, kMaxVocab, 0, source);
    g.top_p = number_field(j, "top_p", 0, 1, 1.0, source);
    g.repetition_penalty = number_field(j, "repetition_penalty", 1e-6, 1e6, 1.0, source);
    g.eos_token_ids = id_list(j, "eos_token_id", source);
    g.bos_token_id = int_field(j, "bos_token_id", -1, kMaxVocab - 1, -1, source);
    return g;
}

GenerationDefaults read_generation_defaults(const std::string &dir, const ModelConfig &config) {
    const std::string path = dir + "/generation_config.json";
    struct stat st {};
    GenerationDefaults g;
    if (::stat(path.c_str(), &st) == 0) g = parse_generation_config(read_bounded_file(path, kMaxConfigBytes, "generation_config.json"), path);
    if (g.eos_token_ids.empty()) g.eos_token_ids = config.eos_token_ids;
    if (g.bos_token_id < 0) g.bos_token_id = config.bos_token_id;
    return g;
}

}  // namespace ipex::llm
