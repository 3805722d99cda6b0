#include "llm/limits.h"

#include <unistd.h>

#include <cstdio>

#include "base/errors.h"

namespace ipex::llm {
namespace {

std::string bytes_text(double bytes) {
    const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6) {
        bytes /= 1024;
        ++u;
    }
    char text[64];
    std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return text;
}

// Physical memory of the machine; 0 when unknown (then nothing is refused for its size).
double physical_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
}

// In double: products of the largest counts overflow 64-bit integers.
double run_bytes_exact(const ModelConfig &c, const RunSize &s, int64_t cache_elem_bytes) {
    const auto d = [](int64_t v) { return static_cast<double>(v); };
    const double cache = 2 * d(c.num_layers) * d(s.batch) * d(c.num_kv_heads) * d(c.head_dim) * d(s.positions) *
                         d(cache_elem_bytes);
    const double tables = c.rope_scaling.type == "longrope" ? 2 : 1;  // longrope keeps a long-run table too
    const double rope = 2 * tables * d(s.positions) * d(c.rotary_dim / 2) * 4;
    // fp32 rows of the forward pass (residual, normed input and its low-precision copy, q/k/v,
    // attention output and its copy, gate/up and the activation) and the logits.
    const double qdim = d(c.num_heads * c.head_dim), kvdim = d(c.num_kv_heads * c.head_dim);
    const double per_row = 4 * (4 * d(c.hidden_size) + 3 * qdim + 2 * kvdim + 3 * d(c.intermediate_size)) + 16;
    const double logits = 2 * 4 * d(s.logits_rows) * d(c.vocab_size);
    return cache + rope + per_row * d(s.prefill_rows) + logits;
}

}  // namespace

std::string range_text(CountRange range) {
    return "[" + std::to_string(range.lo) + ", " + std::to_string(range.hi) + "]";
}

void check_count(const std::string &option, int64_t value, CountRange range) {
    if (value < range.lo || value > range.hi)
        throw_usage(option + " must be in " + range_text(range) + ", got " + std::to_string(value));
}

bool check_positions(const ModelConfig &c, int64_t needed, const std::string &asked, bool allow_long_context) {
    const std::string needs = asked + " needs " + std::to_string(needed) + " positions";
    if (needed > kMaxPositions)
        throw_usage(needs + ", more than the " + std::to_string(kMaxPositions) +
                    " positions ipex-tool runs at most (the model declares " + c.position_limit_source + ")");
    if (needed <= c.position_limit) return false;
    if (!allow_long_context)
        throw_usage(needs + "; the model declares " + c.position_limit_source +
                    "; pass --allow-long-context to go past it (up to " + std::to_string(kMaxPositions) + ")");
    return true;
}

uint64_t run_bytes(const ModelConfig &config, const RunSize &size, int64_t cache_elem_bytes) {
    const double bytes = run_bytes_exact(config, size, cache_elem_bytes);
    return bytes >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(bytes);
}

void check_run_memory(const ModelConfig &c, const RunSize &s, int64_t cache_elem_bytes, const std::string &asked) {
    const double bytes = run_bytes_exact(c, s, cache_elem_bytes), memory = physical_memory_bytes();
    if (memory <= 0 || bytes <= memory) return;
    std::string parts;
    if (s.positions > 0)
        parts = "a KV cache of " + std::to_string(s.batch) + " x " + std::to_string(s.positions) + " positions over " +
                std::to_string(c.num_layers) + " layers";
    if (s.prefill_rows > 0) parts += (parts.empty() ? "" : ", ") + std::string("a prefill of ") +
                                     std::to_string(s.prefill_rows) + " tokens";
    throw_usage(asked + " needs " + bytes_text(bytes) + " besides the weights (" + parts + "), more than this machine's " +
                bytes_text(memory) + " of memory: ask for fewer sequences or positions");
}

void check_tokenizer_vocab(const Tokenizer &t, const ModelConfig &c, const std::string &source) {
    for (int64_t id = c.vocab_size; id < t.vocab_size(); ++id) {
        const std::string &token = t.token(static_cast<int32_t>(id));
        if (token.empty()) continue;  // an id the file does not use
        throw_bad_input("'" + source + "': token id " + std::to_string(id) + " ('" + token + "', " +
                        (t.is_added(static_cast<int32_t>(id)) ? "added_tokens" : "model.vocab") +
                        ") is outside config.json's vocab_size " + std::to_string(c.vocab_size) +
                        ": the tokenizer does not belong to this model (are tokenizer.json and config.json from the "
                        "same checkpoint?)");
    }
}

Tokenizer load_tokenizer(const std::string &dir, const ModelConfig &config) {
    Tokenizer t = Tokenizer::load(dir);
    check_tokenizer_vocab(t, config, dir + "/tokenizer.json");
    return t;
}

void check_generation_ids(const GenerationDefaults &g, const ModelConfig &c, const std::string &source) {
    const auto check = [&](const char *field, int64_t id) {
        if (id >= c.vocab_size)
            throw_bad_input("'" + source + "': field '" + field + "' = " + std::to_string(id) +
                            " is not below config.json's vocab_size " + std::to_string(c.vocab_size) +
                            " (no such token in this model)");
    };
    for (int64_t id : g.eos_token_ids) check("eos_token_id", id);
    check("bos_token_id", g.bos_token_id);
}

}  // namespace ipex::llm
