// What a run of the LLM commands may ask for, checked before anything is allocated or the
// weights are loaded: every count an option gives lies in its range (one table below), the
// positions a run needs stay within what the model declares (ModelConfig::position_limit)
// unless the user passes --allow-long-context, and never beyond kMaxPositions; the KV cache
// and the prefill's working set fit in the machine's memory; tokenizer.json holds no id that
// config.json's vocab_size does not cover. Usage errors are exit 2 naming the option, files
// at fault exit 3 naming the file.
#pragma once

#include <cstdint>
#include <string>

#include "core/system_info.h"
#include "llm/config.h"
#include "llm/tokenizer.h"

namespace ipex::llm {

// Sequences in one run (generate's prompts, bench --llm --batch).
constexpr int64_t kMaxBatch = 4096;
// Timed runs of bench --llm.
constexpr int64_t kMaxIterations = 1000000;
// Intra-op threads.
constexpr int64_t kMaxThreads = ipex::kMaxThreads;

// The range of a count option, both ends included.
struct CountRange {
    int64_t lo = 0, hi = 0;
};

// The one table of count ranges; --help and the man page state the same numbers.
namespace counts {
constexpr CountRange input_tokens{1, kMaxPositions};
constexpr CountRange output_tokens{1, kMaxPositions};
constexpr CountRange batch{1, kMaxBatch};
constexpr CountRange prompts{1, kMaxBatch};
constexpr CountRange iterations{1, kMaxIterations};
constexpr CountRange max_new_tokens{0, kMaxPositions};
constexpr CountRange max_length{1, kMaxPositions};
constexpr CountRange context{2, kMaxPositions};
constexpr CountRange stride{1, kMaxPositions};
constexpr CountRange top_k{0, kMaxVocab};
constexpr CountRange threads{1, kMaxThreads};
}  // namespace counts

// "[1, 4096]", for help texts.
std::string range_text(CountRange range);

// Exit 2 unless value lies in range: "--batch must be in [1, 4096], got 5000".
void check_count(const std::string &option, int64_t value, CountRange range);

// Exit 2 when a run needs more positions than kMaxPositions, or than the model declares
// while allow_long_context is false. `asked` names what needs them, with the options:
// "prompt (300 tokens) + --max-new-tokens 10000000". Returns whether the run goes past the
// declared positions (allowed), so that the caller can say so once.
bool check_positions(const ModelConfig &config, int64_t needed, const std::string &asked, bool allow_long_context);

// What a run holds in memory besides the weights: a KV cache of batch x positions (elements
// of cache_elem_bytes) with its rotary tables, and a prefill of prefill_rows tokens of which
// logits_rows get logits.
struct RunSize {
    int64_t batch = 1, positions = 0, prefill_rows = 0, logits_rows = 0;
};
uint64_t run_bytes(const ModelConfig &config, const RunSize &size, int64_t cache_elem_bytes);
// Exit 2 when run_bytes exceeds the machine's physical memory; `asked` as above.
void check_run_memory(const ModelConfig &config, const RunSize &size, int64_t cache_elem_bytes,
                      const std::string &asked);

// Exit 3 naming `source` (tokenizer.json), the id, its token and config.json's vocab_size
// when the tokenizer holds an id (model.vocab or added_tokens) at or above vocab_size.
void check_tokenizer_vocab(const Tokenizer &tokenizer, const ModelConfig &config, const std::string &source);
// <dir>/tokenizer.json, checked against the model's config.json as above.
Tokenizer load_tokenizer(const std::string &dir, const ModelConfig &config);

// Exit 3 naming `source` (generation_config.json) and the field when its eos/bos ids are
// not below config.json's vocab_size (config.json's own ids are checked as it is parsed).
void check_generation_ids(const GenerationDefaults &generation, const ModelConfig &config, const std::string &source);

}  // namespace ipex::llm
