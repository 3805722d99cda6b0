// ipex_tool::llm_load, llm_generate and llm_release: `ipex_tool.llm` in Python. A model
// directory is loaded once (commands/generate.h, load_for_generate) and kept in a registry
// under an integer handle, so repeated generate calls neither reload the weights nor re-read
// the tokenizer; generation runs the driver of `ipex-tool generate` on it.
#pragma once

#include <cstdint>
#include <string>

namespace ipex::pybridge {

// Loads MODEL_DIR. `options_json`: "dtype" (bf16 | fp32), "woq_dtype" (int4 | int8),
// "group_size", "lowp_mode", "threads". Returns {"handle", "architecture", "weights",
// "tokenizer" (bool), "vocab_size", "warnings"}.
std::string llm_load(const std::string &dir, const std::string &options_json);

// Generates with the model `handle` names. `request_json`: "prompts" ([text]), "prompt_ids"
// ([[id]]), "max_new_tokens", "max_length", "greedy", "temperature", "top_k", "top_p", "seed",
// "repetition_penalty", "no_special", "allow_long_context". Returns generate --json's report
// with "warnings".
std::string llm_generate(int64_t handle, const std::string &request_json);

// Drops the model `handle` names (its memory is freed once no call uses it); unknown handles
// are a usage error.
void llm_release(int64_t handle);

}  // namespace ipex::pybridge
