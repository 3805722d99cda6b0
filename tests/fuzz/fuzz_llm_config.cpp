// Fuzz target: config.json and generation_config.json of a Hugging Face decoder. Any byte
// string is a validated config or exit 3 (malformed) / 4 (unsupported architecture or rope
// scaling), never a crash; accepted sizes are inside the documented bounds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "llm/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const ipex::llm::ModelConfig c = ipex::llm::parse_config(text, "config.json");
        if (c.hidden_size < 1 || c.hidden_size > ipex::llm::kMaxHidden) __builtin_trap();
        if (c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads != 0) __builtin_trap();
        if (c.head_dim < 2 || c.head_dim % 2 != 0) __builtin_trap();
        if (c.vocab_size < 1 || c.vocab_size > ipex::llm::kMaxVocab) __builtin_trap();
        for (int64_t id : c.eos_token_ids)
            if (id < 0 || id >= c.vocab_size) __builtin_trap();
        if (c.rotary_dim < 2 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0) __builtin_trap();
        if (!c.sliding_layers.empty() && static_cast<int64_t>(c.sliding_layers.size()) != c.num_layers) __builtin_trap();
        if (c.num_experts > 0 && (c.experts_per_token < 1 || c.experts_per_token > c.num_experts ||
                                  static_cast<int64_t>(c.sparse_layers.size()) != c.num_layers))
            __builtin_trap();
        const auto half = static_cast<size_t>(c.rotary_dim / 2);
        if (c.rope_scaling.type == "longrope" &&
            (c.rope_scaling.short_factor.size() != half || c.rope_scaling.long_factor.size() != half))
            __builtin_trap();
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input && e.code() != ipex::ExitCode::unsupported) __builtin_trap();
    }
    try {
        ipex::llm::parse_generation_config(text, "generation_config.json");
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    return 0;
}
