// tokenizer.json (Hugging Face tokenizers) for BPE models: byte-level BPE (GPT-2 rules,
// Llama 3, Qwen2: ByteLevel and Split pre-tokenizers) and SentencePiece-style BPE with byte
// fallback (Llama 2, Mistral, TinyLlama: Prepend/Replace normalizers or Metaspace), added and
// special tokens, the post-processor's BOS, encode and decode. The file is untrusted: sizes
// are bounded, ids checked, anything unknown is exit 4 naming the component, malformed is
// exit 3 naming the field.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/unicode.h"

namespace ipex::llm {

constexpr size_t kMaxTokenizerBytes = size_t(64) << 20;
constexpr int64_t kMaxTokenizerVocab = int64_t(1) << 22;

class Tokenizer {
public:
    static Tokenizer parse(const std::string &json_text, const std::string &source);
    // <dir>/tokenizer.json.
    static Tokenizer load(const std::string &dir);

    // Exit 3 when text is not valid UTF-8. add_special: the post-processor's tokens (BOS).
    std::vector<int32_t> encode(const std::string &text, bool add_special = true) const;
    std::string decode(const std::vector<int32_t> &ids, bool skip_special = true) const;
    // The bytes token `id` contributes to decoded text (first: at the start of the text).
    std::string piece(int32_t id, bool first, bool skip_special = true) const;

    int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }  // highest id + 1
    // The token of an id below vocab_size() as the file writes it ("" for an id it leaves out).
    const std::string &token(int32_t id) const { return tokens_.at(static_cast<size_t>(id)); }
    // Whether the id comes from added_tokens (else from model.vocab).
    bool is_added(int32_t id) const {
        for (const auto &a : added_)
            if (a.second == id) return true;
        return false;
    }
    int32_t id_of(const std::string &token) const;  // -1 when absent
    bool is_special(int32_t id) const;
    const std::string &kind() const { return kind_; }  // "byte-level" | "sentencepiece"

private:
    std::vector<int32_t> bpe(const std::vector<std::string> &symbols) const;
    void encode_segment(const std::string &text, bool first, std::vector<int32_t> *out) const;

    std::string kind_;
    std::unordered_map<std::string, int32_t> vocab_;
    std::vector<std::string> tokens_;  // by id ("" for holes)
    std::unordered_map<std::string, int32_t> merges_;  // "a b" -> rank
    std::vector<std::pair<std::string, int32_t>> added_;  // content, id (longest first)
    std::vector<bool> special_;
    bool byte_level_ = false, byte_fallback_ = false, ignore_merges_ = false, fuse_unk_ = false;
    bool add_prefix_space_ = false;
    unicode::SplitPattern split_ = unicode::SplitPattern::none;
    bool byte_level_regex_ = false;  // ByteLevel with use_regex: GPT-2 pattern
    // SentencePiece-style text handling.
    std::string normalizer_prepend_; // Prepend normalizer: before every non-empty segment
    std::string prepend_;            // Metaspace prepend ("▁"): unless the segment starts with it
    bool prepend_first_only_ = false;
    std::vector<std::pair<std::string, std::string>> replace_;  // Replace normalizers
    bool metaspace_split_ = false;
    bool nfc_ = false;
    // Decoder: strip this many leading spaces of the whole text (SentencePiece "Strip").
    int strip_leading_ = 0;
    int32_t unk_ = -1;
    std::vector<int32_t> prefix_ids_, suffix_ids_;  // post-processor
};

// Turns generated ids into UTF-8 text as they come: bytes of a character split across tokens
// are held until it is complete; invalid sequences become U+FFFD.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer &tokenizer) : tokenizer_(tokenizer) {}
    std::string push(int32_t id);
    std::string finish();  // whatever is pending (incomplete bytes as U+FFFD)

private:
    const Tokenizer &tokenizer_;
    std::string pending_;
    bool first_ = true;
};

}  // namespace ipex::llm
