// A decoder loaded from a Hugging Face model directory and converted once for this CPU, and
// a Session that runs it over a preallocated KV cache. This is the C++ API the generate,
// bench --llm and perplexity commands sit on:
//
//   auto model = ipex::llm::Model::load("TinyLlama-1.1B", {});      // bf16, prepacked
//   ipex::llm::Session session(model, /*batch=*/1, /*max_length=*/512);
//   auto logits = session.prefill({prompt_ids});                     // [1, vocab]
//   int next = ipex::llm::argmax(logits.row(0), logits.vocab);
//   logits = session.decode({next});                                 // one step
//
// Batches are ragged: sequence b has its own length and positions 0..len-1; prefill
// multiplies the rows of all prompts as one matrix, attention runs per sequence (no padding,
// no masks). Everything is validated before any compute (exit 3/4, see config.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llm/attention.h"
#include "llm/config.h"
#include "llm/linear.h"

namespace ipex::llm {

struct LoadOptions {
    std::string dtype = "bf16";     // bf16 | fp32: dense weights and activations
    int woq_bits = 0;               // 0 | 4 | 8: quantize dense checkpoints on load
    int64_t group_size = 0;       // -1: per output channel; 0: 128 where it divides, else per channel
    std::string lowp_mode = "auto"; // WOQ activations: auto (woq::LowpAuto::bf16_model_best_dot) | fp32 | bf16 | int8
    bool gguf_dequantize = false;   // GGUF: every type dequantized to dense (the tests' reference)
    std::string qconfig;            // SmoothQuant W8A8 qconfig (llm/w8a8_config.h), "" for none
    bool observe = false;           // calibration: the layers' projections record their inputs
    // Dense weights already in the math dtype read in place from the mapped checkpoint (false:
    // copied into the CPU allocator's huge pages; --no-mmap).
    bool mmap = true;
};

// A sparse layer's MLP: the router [experts, hidden] (fp32), each expert's merged gate/up and
// down projections, and Qwen2-MoE's shared expert with its gate [hidden] (fp32).
struct Experts {
    at::Tensor router;  // fp32 [hidden, experts]: the router's weight transposed
    std::vector<Linear> gate_up, down;
    Linear shared_gate_up, shared_down;
    at::Tensor shared_gate;  // undefined without a shared expert
};

struct DecoderLayer {
    Linear qkv, o, gate_up, down;  // gate_up and down empty in a sparse layer
    at::Tensor input_norm, post_norm;  // fp32 [hidden]
    at::Tensor q_norm, k_norm;         // fp32 [head_dim] with ModelConfig::qk_norm, else undefined
    // Gemma: the norms of the attention output and the MLP output before their residual adds
    // (post_norm is then the MLP's input norm, pre_feedforward_layernorm); else undefined.
    at::Tensor attn_out_norm, mlp_out_norm;
    std::shared_ptr<const Experts> experts;  // a sparse layer's, else null
};

class Model {
public:
    static std::shared_ptr<const Model> load(const std::string &dir, const LoadOptions &options);

    const ModelConfig &config() const { return config_; }
    const GenerationDefaults &generation() const { return generation_; }
    const std::string &directory() const { return dir_; }
    // Bytes of weights one decode step reads (all projections, lm_head, one embedding row).
    uint64_t weight_bytes_per_token() const;
    // Bytes of every weight the model holds, in every layout it keeps (embedding, norms,
    // projections and their other copies): what peak RSS is compared with.
    uint64_t resident_weight_bytes() const;
    // Bytes of the embedding table as held (a weight-only table shared with a tied head counts
    // here too).
    uint64_t embedding_bytes() const;
    // fp32 [ids, hidden]: the embedding rows of `ids` (int64), before any embedding scale.
    at::Tensor embed(const at::Tensor &ids) const;
    // Floating-point operations of a prefill of `tokens` tokens (projections, causal
    // attention, lm_head of the last position).
    double prefill_flops(int64_t tokens) const;
    // "bf16", "fp32", "int4 g128 (lowp bf16)", "gptq int4 g128 (lowp bf16)".
    const std::string &weights_description() const { return description_; }
    // Decoder layer `layer`'s projections as held, "; "-separated (Linear::describe: "qkv_proj
    // 2048->2560 bf16 (3 parts)" where the parts are read in place apart).
    std::string layer_description(int64_t layer) const;
    kernels::CacheType cache_type() const { return cache_type_; }
    // With LoadOptions::observe, the decoder layers' projections' observers in layer order
    // (qkv, o, gate_up, down); else empty.
    std::vector<std::shared_ptr<InputObserver>> observers() const;

private:
    friend class Session;
    Model() = default;
    std::string dir_, description_;
    ModelConfig config_;
    GenerationDefaults generation_;
    at::Tensor embed_;  // [vocab, hidden], as stored; undefined when embed_woq_ holds it
    // A GGUF table of a type held weight-only (q4_0, q8_0, q4_K, ...: checkpoint/gguf_woq.h),
    // kept as stored and dequantized row by row on lookup; a tied head reads the same tensors.
    std::optional<woq::WoqLayer> embed_woq_;
    std::vector<DecoderLayer> layers_;
    at::Tensor final_norm_;
    Linear lm_head_;
    std::vector<float> inv_freq_;       // [rotary_dim / 2], scaling applied
    std::vector<float> inv_freq_long_;  // longrope: past original_max_position_embeddings, else empty
    std::vector<float> inv_freq_local_; // Gemma 3's sliding layers (rope_local_theta), else empty
    float embed_scale_ = 1.f;           // Gemma: sqrt(hidden_size) in the embedding's dtype
    kernels::CacheType cache_type_ = kernels::CacheType::bf16;
};

// Logits of some rows, fp32 [rows][vocab], valid until the next call on the session.
struct Logits {
    const float *data = nullptr;
    int64_t rows = 0, vocab = 0;
    const float *row(int64_t r) const { return data + r * vocab; }
};

class Session {
public:
    // Exit 2 when batch is outside [1, kMaxBatch], when max_length is past the positions the
    // model declares (ModelConfig::position_limit; up to kMaxPositions with
    // allow_long_context) or when the cache would not fit in the machine's memory.
    Session(std::shared_ptr<const Model> model, int64_t batch, int64_t max_length, bool allow_long_context = false);

    // Appends tokens[b] to sequence b (b < batch; empty lists leave a sequence as it is).
    // Returns the logits of each sequence's last new position, [batch] rows (rows of
    // sequences given no tokens are stale), or with all_positions one row per new token in
    // order. Exit 2 when a sequence would exceed max_length.
    Logits prefill(const std::vector<std::vector<int32_t>> &tokens, bool all_positions = false);
    // One token per sequence (all `batch` of them); [batch] rows.
    Logits decode(const std::vector<int32_t> &tokens);

    int64_t length(int64_t seq) const { return lengths_[static_cast<size_t>(seq)]; }
    int64_t batch() const { return batch_; }
    int64_t max_length() const { return max_length_; }
    uint64_t cache_bytes() const { return cache_.bytes(); }
    const Model &model() const { return *model_; }
    void reset();

private:
    // rows tokens; row i belongs to seq_[i] at position pos_[i]. Segments of one sequence are
    // contiguous. logits_rows: which rows get logits.
    Logits forward(const std::vector<int32_t> &ids, const std::vector<int64_t> &logits_rows, bool decode_step);

    std::shared_ptr<const Model> model_;
    int64_t batch_ = 0, max_length_ = 0;
    KvCache cache_;
    std::vector<int64_t> lengths_;
    std::vector<float> cos_, sin_;  // [max_length][rotary_dim / 2]
    std::vector<float> cos_long_, sin_long_;  // longrope's long-run table, else empty
    std::vector<float> cos_local_, sin_local_;  // Gemma 3's sliding layers' table, else empty
    std::vector<int64_t> seq_, pos_;
    at::Tensor logits_;
};

int32_t argmax(const float *logits, int64_t vocab);

}  // namespace ipex::llm
