// The drivers the commands are thin over: generation (greedy or sampled, streamed, ragged
// batches), perplexity over a text in sliding windows, and the LLM latency benchmark
// (first-token and next-token latency as IPEX's LLM benchmark reported them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"

namespace ipex::llm {

struct GenerateOptions {
    int64_t max_new_tokens = 128;
    int64_t max_length = 0;  // KV cache positions; 0: longest prompt + max_new_tokens
    SamplingOptions sampling;
    std::vector<int64_t> eos_ids;  // stop tokens (empty: none)
};

struct GenerateResult {
    std::vector<std::vector<int32_t>> prompt_ids, ids;  // per sequence; ids: generated only
    std::vector<std::string> text, stop_reason;         // "eos" | "length"
    double prefill_ms = 0;       // prompt processing + first token
    std::vector<double> step_ms; // each later step
    double total_ms = 0;
};

// on_text(seq, utf8) receives decoded text as tokens come (never splits a character).
GenerateResult generate(std::shared_ptr<const Model> model, const Tokenizer *tokenizer,
                        const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &options,
                        const std::function<void(int64_t, const std::string &)> &on_text);

struct PerplexityResult {
    double perplexity = 0, nll = 0;
    int64_t tokens = 0, scored = 0, windows = 0;
    double seconds = 0;
};
// Hugging Face's strided evaluation: windows of `context` tokens every `stride`, each token
// scored once, with as much left context as the window gives.
PerplexityResult perplexity(std::shared_ptr<const Model> model, const std::vector<int32_t> &ids, int64_t context,
                            int64_t stride);

struct LlmBenchOptions {
    int64_t input_tokens = 32, output_tokens = 32, batch = 1, iterations = 3, warmup = 1;
    uint64_t seed = 0;
};
struct LatencyStats {
    double mean = 0, p50 = 0, p90 = 0, p99 = 0, min = 0;
};
struct LlmBenchResult {
    LatencyStats first_token_ms, next_token_ms;
    double tokens_per_second = 0;  // generated tokens (all sequences) per second
    double prefill_gflops = 0;     // of the projections, per first-token time
    uint64_t weight_bytes_per_token = 0;
    uint64_t peak_rss_bytes = 0;
    uint64_t kv_cache_bytes = 0;
};
LlmBenchResult bench_llm(std::shared_ptr<const Model> model, const LlmBenchOptions &options);

LatencyStats latency_stats(std::vector<double> ms);
uint64_t peak_rss_bytes();

}  // namespace ipex::llm
