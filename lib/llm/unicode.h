// UTF-8 and the Unicode classes the pre-tokenizers need (letters \p{L}, numbers \p{N},
// White_Space), through ICU. Also the pre-tokenizer regexes of GPT-2, Llama 3 and Qwen2,
// matched by hand (no regex engine): each is identified from its pattern string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ipex::llm::unicode {

// Code points of valid UTF-8; false (out untouched past the error) on invalid input.
bool decode_utf8(const std::string &text, std::vector<char32_t> *out);
void append_utf8(char32_t c, std::string *out);
std::string to_utf8(const std::vector<char32_t> &cps, size_t begin, size_t end);
// Length of the longest prefix of `bytes` that is complete, valid UTF-8 followed only by
// the start of an incomplete sequence; *invalid is set when an invalid sequence stops it.
size_t complete_utf8_prefix(const std::string &bytes, bool *invalid);

bool is_letter(char32_t c);
bool is_number(char32_t c);
bool is_space(char32_t c);
std::u32string nfc(const std::u32string &s);

enum class SplitPattern { none, gpt2, llama3, qwen2 };
// Which known pattern a tokenizer.json "Regex" is; none when unknown.
SplitPattern identify_pattern(const std::string &regex);
// Splits code points into the matches of `pattern` (the text between matches, if any, is
// kept as its own piece, as Split's "Isolated" behaviour does).
std::vector<std::pair<size_t, size_t>> split(const std::vector<char32_t> &cps, SplitPattern pattern);

}  // namespace ipex::llm::unicode
