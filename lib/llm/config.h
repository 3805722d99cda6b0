// The decoder's hyper-parameters, read from a Hugging Face config.json (and the optional
// generation_config.json beside it). Families: LlamaForCausalLM (Llama 2/3/3.1/3.2, TinyLlama,
// rope_scaling "llama3" and "linear"), MistralForCausalLM (sliding window), Qwen2ForCausalLM
// (q/k/v bias, tied embeddings), Qwen3ForCausalLM (q and k normalized per head),
// Phi3ForCausalLM (Phi-3, Phi-3.5-mini, Phi-4-mini: fused qkv and gate/up, partial rotary, longrope),
// Gemma2ForCausalLM and Gemma3ForCausalLM (gelu-tanh MLP, norms before and after attention and
// MLP with weights stored as w - 1, scaled embeddings, soft-capping, sliding-window layers
// alternating with global ones, Gemma 3's local rotary base); mixtures of experts:
// MixtralForCausalLM, Qwen2MoeForCausalLM (shared expert with its gate), Qwen3MoeForCausalLM,
// OlmoeForCausalLM (q and k normalized over the whole projection). An other architecture is exit 4 naming it and the supported
// list; a missing or malformed field is exit 3 naming it. Nothing is computed before this
// validation passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ipex::llm {

// Largest config.json / generation_config.json accepted.
constexpr size_t kMaxConfigBytes = size_t(4) << 20;
// Bounds of the sizes a config may state (far beyond any released model, small enough that
// products of them cannot overflow int64).
constexpr int64_t kMaxHidden = 1 << 16;
constexpr int64_t kMaxLayers = 1 << 10;
constexpr int64_t kMaxVocab = 1 << 22;
constexpr int64_t kMaxPositions = 1 << 24;

struct RopeScaling {
    std::string type;  // "" (none), "llama3", "linear", "longrope", "yarn", "dynamic"
    double factor = 1.0;
    double low_freq_factor = 1.0;
    double high_freq_factor = 4.0;
    // llama3: default 8192. linear: 0 when the config does not state it.
    int64_t original_max_position_embeddings = 8192;
    // longrope (Phi-3, Phi-4-mini): per-frequency divisors [rotary_dim / 2], short_factor for
    // runs within original_max_position_embeddings, long_factor past it; cos and sin scaled by
    // attention_factor (stated, or sqrt(1 + ln(s) / ln(original)) for s = max positions / original).
    std::vector<double> short_factor, long_factor;
    double attention_factor = 1.0;  // longrope and yarn: cos and sin scaled by it
    // yarn: frequencies between beta_fast and beta_slow rotations over the original length are
    // blended from extrapolated (unscaled) to interpolated (divided by factor); attention_factor
    // stated, or 0.1 ln(factor) + 1 (with mscale / mscale_all_dim, their ratio of that form).
    double beta_fast = 32, beta_slow = 1, mscale = 0, mscale_all_dim = 0;
    bool truncate = true;
    // dynamic: a call whose last position reaches past original_max_position_embeddings rotates
    // with base theta * (factor * length / original - (factor - 1))^(d / (d - 2)).
};

struct ModelConfig {
    std::string architecture;  // as written in "architectures"
    // "llama" | "mistral" | "qwen2" | "qwen3" | "phi3" | "gemma2" | "gemma3" | "mixtral" | "qwen2_moe" |
    // "qwen3_moe" | "olmoe"
    std::string family;
    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;
    int64_t num_layers = 0;
    int64_t num_heads = 0;
    int64_t num_kv_heads = 0;
    int64_t head_dim = 0;
    int64_t rotary_dim = 0;    // leading channels of a head the rotation turns: head_dim * partial_rotary_factor
    bool fused_projections = false;  // the checkpoint stores qkv_proj and gate_up_proj (Phi-3)
    // The text model of an image-text checkpoint (Gemma3ForConditionalGeneration): its tensors
    // are under language_model.* (or model.language_model.*), the vision tower is not loaded.
    bool text_of_multimodal = false;
    bool sliding(int64_t layer) const {
        return sliding_window > 0 && (sliding_layers.empty() || sliding_layers[static_cast<size_t>(layer)]);
    }
    int64_t vocab_size = 0;
    int64_t max_position_embeddings = 0;
    // Positions the model declares it handles, and where that figure comes from (for
    // messages): max_position_embeddings, which for rope_scaling llama3 is already the
    // extended length (Hugging Face writes it so); for rope_scaling linear with a factor > 1
    // it is the original length times the factor, unless rope_scaling states an
    // original_max_position_embeddings below max_position_embeddings (then that is already
    // the extended one). Runs stop here unless the user passes --allow-long-context.
    int64_t position_limit = 0;
    std::string position_limit_source;  // "max_position_embeddings 512 (DIR/config.json)"
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;
    bool tie_word_embeddings = false;
    bool attention_bias = false;  // q/k/v (and o for Llama's attention_bias) have biases
    bool o_bias = false;
    bool mlp_bias = false;
    bool qk_norm = false;         // q and k RMS-normalized per head before the rotary embedding (Qwen3)
    bool qk_norm_full = false;    // ... over the whole q and k projections instead (OLMoE)
    // Mixture of experts: a sparse layer's MLP is num_experts experts of moe_intermediate_size,
    // experts_per_token of them chosen per token by the router's softmax (their weights
    // renormalized to sum 1 with norm_topk_prob), plus a shared expert of
    // shared_expert_intermediate_size scaled by sigmoid(its gate) where stated (Qwen2-MoE).
    int64_t num_experts = 0;
    int64_t experts_per_token = 0;
    int64_t moe_intermediate_size = 0;
    int64_t shared_expert_intermediate_size = 0;
    bool norm_topk_prob = false;
    std::vector<bool> sparse_layers;  // which layers are sparse (num_layers entries with experts)
    bool sparse(int64_t layer) const { return num_experts > 0 && sparse_layers[static_cast<size_t>(layer)]; }
    int64_t sliding_window = 0;   // 0: none
    // Layers that attend within sliding_window (layer_types "sliding_attention", or the family's
    // rule); empty: all layers do when sliding_window > 0.
    std::vector<bool> sliding_layers;
    double rope_local_theta = 0;  // Gemma 3: the sliding layers' rotary base, unscaled (0: rope_theta)
    // Gemma: RMSNorm weights are stored as w - 1 (applied as 1 + w), the embedding rows are
    // scaled by sqrt(hidden_size), each attention output and MLP output is normalized before its
    // residual add (post_attention_layernorm, post_feedforward_layernorm; the MLP's input norm is
    // pre_feedforward_layernorm), and the MLP is gelu(tanh)(gate) * up.
    bool gemma_norms = false;
    bool gelu_mlp = false;         // hidden_activation gelu_pytorch_tanh (else silu)
    double attention_scale = 0;    // scores' scale: query_pre_attn_scalar^-0.5, else head_dim^-0.5
    double attn_softcap = 0;       // scores -> cap * tanh(scores / cap) before the softmax (0: none)
    double final_softcap = 0;      // logits -> cap * tanh(logits / cap) (0: none)
    std::string torch_dtype;      // as written ("bfloat16", "float16", "float32", "")
    int64_t bos_token_id = -1;
    std::vector<int64_t> eos_token_ids;
    int64_t pad_token_id = -1;

    // The quantization_config block, if any (re-read by lib/woq's parser).
    bool quantized = false;
};

// What generation_config.json suggests (unset fields keep the defaults).
struct GenerationDefaults {
    bool do_sample = false;
    double temperature = 1.0;
    int64_t top_k = 0;
    double top_p = 1.0;
    double repetition_penalty = 1.0;
    std::vector<int64_t> eos_token_ids;
    int64_t bos_token_id = -1;
};

// The architectures this runtime builds, for messages.
const std::vector<std::string> &supported_architectures();

// Parses config.json text; `source` names the file in messages.
ModelConfig parse_config(const std::string &text, const std::string &source);
// Reads <dir>/config.json, or the metadata of a GGUF file given in place of the directory.
ModelConfig read_config(const std::string &dir);

GenerationDefaults parse_generation_config(const std::string &text, const std::string &source);
// <dir>/generation_config.json when present, else defaults from the model config.
GenerationDefaults read_generation_defaults(const std::string &dir, const ModelConfig &config);

}  // namespace ipex::llm
