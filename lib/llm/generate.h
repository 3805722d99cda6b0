// The drivers the commands are thin over: generation (greedy or sampled, streamed, ragged
// batches), perplexity over a text in sliding windows, and the LLM latency benchmark
// (first-token and next-token latency as IPEX's LLM benchmark reported them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "llm/limits.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"
#include "base/stats.h"

namespace ipex::llm {

struct GenerateOptions {
    int64_t max_new_tokens = 128;
    int64_t max_length = 0;  // tokens per sequence, prompt included; 0: longest prompt + max_new_tokens
    SamplingOptions sampling;
    std::vector<int64_t> eos_ids;  // stop tokens (empty: none)
    bool allow_long_context = false;  // go past the positions the model declares (limits.h)
    // Called with the logits each token is picked from (vocab floats, the model's output before
    // repetition penalty, temperature and top-k/top-p) for sequence b at step 1, 2, ...
    std::function<void(int64_t b, int64_t step, const float *logits)> on_logits;
};

// Where logits first were NaN or infinite.
struct NonFinite {
    int64_t sequence = -1;  // -1: never
    int64_t step = 0;       // 1: the prefill's logits (the first new token), 2: the next step, ...
    int64_t position = 0;   // the position whose logits they were
};

struct GenerateResult {
    std::vector<std::vector<int32_t>> prompt_ids, ids;  // per sequence; ids: generated only
    // "eos" | "length" | "non_finite" (the logits held NaN/Inf: the sequence stopped there,
    // no token was picked from them)
    std::vector<std::string> text, stop_reason;
    NonFinite non_finite;        // the first sequence that stopped so (a warning said it)
    double prefill_ms = 0;       // prompt processing + first token
    std::vector<double> step_ms; // each later step
    double total_ms = 0;
};

// Exit 2 naming the option unless the counts lie in their ranges (limits.h) and the
// sampling options are valid (sampler.h): what can be checked before any file is read.
void check_generate_options(const GenerateOptions &options);
// Checks the options and the prompts against the model's config before anything is
// allocated: counts in their ranges, prompt ids in the vocabulary, the positions (longest
// prompt + max_new_tokens, or max_length when smaller) within what the model declares unless
// allow_long_context, the memory the run needs with KV cache elements of cache_elem_bytes.
// Exit 2 naming the option. Returns the KV cache positions the run needs.
int64_t check_generate(const ModelConfig &config, const std::vector<std::vector<int32_t>> &prompts,
                       const GenerateOptions &options, int64_t cache_elem_bytes = 2);

// on_text(seq, utf8) receives decoded text as tokens come (never splits a character).
// Logits holding NaN or Inf stop their sequence (stop_reason "non_finite") with one warning
// on stderr for the whole run.
GenerateResult generate(std::shared_ptr<const Model> model, const Tokenizer *tokenizer,
                        const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &options,
                        const std::function<void(int64_t, const std::string &)> &on_text);

struct PerplexityResult {
    double perplexity = 0, nll = 0;
    int64_t tokens = 0, scored = 0, windows = 0;
    double seconds = 0;
    // false when a token's loss was NaN/Inf (scoring stopped there: non_finite_position is
    // that token's position in the text) or the perplexity overflowed; a warning said which.
    bool finite = true;
    int64_t non_finite_position = -1;
};
// perplexity's --context when not given: 512, or fewer when the model declares fewer positions.
constexpr int64_t kDefaultContext = 512;
int64_t default_context(const ModelConfig &config);
// Exit 2 (naming --context, --stride) unless 2 <= context <= the positions the model declares
// (kMaxPositions with allow_long_context) and 1 <= stride <= context.
void check_perplexity(const ModelConfig &config, int64_t context, int64_t stride, bool allow_long_context);
// Hugging Face's strided evaluation: windows of `context` tokens every `stride`, each token
// scored once, with as much left context as the window gives.
PerplexityResult perplexity(std::shared_ptr<const Model> model, const std::vector<int32_t> &ids, int64_t context,
                            int64_t stride, bool allow_long_context = false);

struct LlmBenchOptions {
    int64_t input_tokens = 32, output_tokens = 32, batch = 1, iterations = 3, warmup = 1;
    uint64_t seed = 0;
    bool allow_long_context = false;
};
// Exit 2 naming the option unless the counts lie in their ranges (limits.h), input_tokens +
// output_tokens positions are within what the model declares (or allow_long_context) and
// the run fits in memory with KV cache elements of cache_elem_bytes.
void check_bench_llm(const ModelConfig &config, const LlmBenchOptions &options, int64_t cache_elem_bytes = 2);
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
    uint64_t resident_weight_bytes = 0;  // Model::resident_weight_bytes
    // The greedy steps met NaN/Inf logits (timings stand; a warning said where).
    bool non_finite_logits = false;
};
LlmBenchResult bench_llm(std::shared_ptr<const Model> model, const LlmBenchOptions &options);

// The summary of base/stats.h (nearest-rank percentiles) in the fields bench --llm reports.
LatencyStats latency_stats(std::vector<double> ms);
using ipex::peak_rss_bytes;

}  // namespace ipex::llm
