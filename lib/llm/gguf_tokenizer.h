// A GGUF file's tokenizer (its "tokenizer.ggml.*" metadata) as a Hugging Face tokenizer.json
// object that Tokenizer::parse reads, and the chat template it carries. Two kinds:
//   gpt2   byte-level BPE: tokens, merges, the pre-tokenizer "tokenizer.ggml.pre" names,
//          control tokens as special added tokens, BOS as add_bos_token says;
//   llama  SentencePiece-style BPE as llama.cpp's SPM tokenizer runs it: tokens, scores and
//          token types; spaces as U+2581, a leading one as add_space_prefix says, adjacent
//          pieces merged by the score of the merged piece (written as BPE merges ranked by that
//          score, as Hugging Face's converter does), byte tokens <0xXX> for characters the
//          vocabulary lacks, BOS/EOS as add_bos_token/add_eos_token say.
// A malformed field is exit 3 naming the key; another kind or pre-tokenizer is exit 4.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace ipex::llm {

// The longest token the llama kind derives merges for (SentencePiece's pieces are at most 16
// characters by default); a longer one is exit 3.
constexpr size_t kMaxGgufPieceBytes = 4096;

nlohmann::json gguf_tokenizer(const std::string &path);
// The same from metadata already read (`path` names the file in messages).
nlohmann::json gguf_tokenizer_json(const nlohmann::json &metadata, const std::string &path);

// tokenizer_config.json's fields for the GGUF file: bos_token/eos_token/unk_token/pad_token by
// name, add_bos_token, add_eos_token and chat_template (tokenizer.chat_template, kept as text;
// nothing here renders it). Only the fields the file has.
nlohmann::json gguf_tokenizer_config(const nlohmann::json &metadata, const std::string &path);

// The chat template a model carries, as text (nothing renders it): a GGUF file's
// tokenizer.chat_template, or a directory's tokenizer_config.json "chat_template" (a string,
// or of a list of named templates the one named "default"). None when absent; exit 3 when the
// field or the file is malformed.
std::optional<std::string> chat_template(const std::string &model);

}  // namespace ipex::llm
