#include "llm/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

namespace ipex::llm::unicode {

bool decode_utf8(const std::string &text, std::vector<char32_t> *out) {
    const auto *s = reinterpret_cast<const unsigned char *>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        size_t len;
        char32_t cp;
        if (c < 0x80) { len = 1; cp = c; }
        else if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; ++k) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        static const char32_t min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_of_len[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        out->push_back(cp);
        i += len;
    }
    return true;
}

void append_utf8(char32_t c, std::string *out) {
    if (c < 0x80) {
        out->push_back(static_cast<char>(c));
    } else if (c < 0x800) {
        out->push_back(static_cast<char>(0xc0 | (c >> 6)));
        out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else if (c < 0x10000) {
        out->push_back(static_cast<char>(0xe0 | (c >> 12)));
        out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
        out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else {
        out->push_back(static_cast<char>(0xf0 | (c >> 18)));
        out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
        out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
        out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
}

std::string to_utf8(const std::vector<char32_t> &cps, size_t begin, size_t end) {
    std::string out;
    for (size_t i = begin; i < end; ++i) append_utf8(cps[i], &out);
    return out;
}

size_t complete_utf8_prefix(const std::string &bytes, bool *invalid) {
    *invalid = false;
    const auto *s = reinterpret_cast<const unsigned char *>(bytes.data());
    const size_t n = bytes.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0 || (len == 2 && c < 0xc2) || c > 0xf4) {
            *invalid = true;
            return i;
        }
        for (size_t k = 1; k < len; ++k) {
            if (i + k >= n) return i;  // incomplete: wait for more bytes
            if ((s[i + k] & 0xc0) != 0x80) {
                *invalid = true;
                return i;
            }
        }
        std::vector<char32_t> one;
        if (!decode_utf8(bytes.substr(i, len), &one)) {
            *invalid = true;
            return i;
        }
        i += len;
    }
    return i;
}

bool is_letter(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const int8_t t = u_charType(static_cast<UChar32>(c));
    return t == U_UPPERCASE_LETTER || t == U_LOWERCASE_LETTER || t == U_TITLECASE_LETTER || t == U_MODIFIER_LETTER ||
           t == U_OTHER_LETTER;
}

bool is_number(char32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    const int8_t t = u_charType(static_cast<UChar32>(c));
    return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_space(char32_t c) {
    if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
    return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

std::u32string nfc(const std::u32string &s) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2 *norm = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status)) return s;
    const icu::UnicodeString src =
        icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32 *>(s.data()), static_cast<int32_t>(s.size()));
    const icu::UnicodeString dst = norm->normalize(src, status);
    if (U_FAILURE(status)) return s;
    std::u32string out(static_cast<size_t>(dst.countChar32()), U'\0');
    UErrorCode st2 = U_ZERO_ERROR;
    dst.toUTF32(reinterpret_cast<UChar32 *>(out.data()), static_cast<int32_t>(out.size()), st2);
    return out;
}

namespace {

constexpr const char *kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char *kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char *kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool newline(char32_t c) { return c == '\r' || c == '\n'; }

char32_t lower_ascii(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length of a match at i of the pattern's alternatives, tried in order (0: none).
size_t match_at(const std::vector<char32_t> &s, size_t i, SplitPattern p) {
    const size_t n = s.size();
    const bool modern = p != SplitPattern::gpt2;
    // contractions
    if (s[i] == '\'' && i + 1 < n) {
        const auto c = [&](size_t k) { return modern ? lower_ascii(s[k]) : s[k]; };
        if (i + 2 < n) {
            const char32_t a = c(i + 1), b = c(i + 2);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
        }
        const char32_t a = c(i + 1);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    }
    // letters with an optional prefix
    {
        size_t j = i;
        if (modern) {
            if (!newline(s[j]) && !is_letter(s[j]) && !is_number(s[j]) && j + 1 < n && is_letter(s[j + 1])) ++j;
        } else if (s[j] == ' ' && j + 1 < n && is_letter(s[j + 1])) {
            ++j;
        }
        if (is_letter(s[j])) {
            while (j < n && is_letter(s[j])) ++j;
            return j - i;
        }
    }
    // numbers
    if (p == SplitPattern::gpt2) {
        size_t j = i;
        if (s[j] == ' ' && j + 1 < n && is_number(s[j + 1])) ++j;
        if (is_number(s[j])) {
            while (j < n && is_number(s[j])) ++j;
            return j - i;
        }
    } else if (is_number(s[i])) {
        const size_t most = p == SplitPattern::llama3 ? 3 : 1;
        size_t j = i;
        while (j < n && j - i < most && is_number(s[j])) ++j;
        return j - i;
    }
    // punctuation and symbols
    {
        const auto other = [&](char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); };
        size_t j = i;
        if (s[j] == ' ' && j + 1 < n && other(s[j + 1])) ++j;
        if (other(s[j])) {
            while (j < n && other(s[j])) ++j;
            if (modern)
                while (j < n && newline(s[j])) ++j;
            return j - i;
        }
    }
    if (!is_space(s[i])) return 0;
    size_t run = i;
    while (run < n && is_space(s[run])) ++run;
    if (modern) {  // \s*[\r\n]+: up to the last newline of the run
        size_t last = run;
        for (size_t k = i; k < run; ++k)
            if (newline(s[k])) last = k;
        if (last != run) return last + 1 - i;
    }
    if (run == n) return run - i;        // \s+(?!\S) at the end
    if (run - i >= 2) return run - i - 1;  // leave one space to the next word
    return run - i;                         // \s+
}

}  // namespace

SplitPattern identify_pattern(const std::string &regex) {
    if (regex == kGpt2) return SplitPattern::gpt2;
    if (regex == kLlama3) return SplitPattern::llama3;
    if (regex == kQwen2) return SplitPattern::qwen2;
    return SplitPattern::none;
}

std::vector<std::pair<size_t, size_t>> split(const std::vector<char32_t> &cps, SplitPattern pattern) {
    std::vector<std::pair<size_t, size_t>> pieces;
    size_t gap = 0;
    for (size_t i = 0; i < cps.size();) {
        const size_t len = match_at(cps, i, pattern);
        if (len == 0) {
            ++i;
            continue;
        }
        if (gap < i) pieces.emplace_back(gap, i);
        pieces.emplace_back(i, i + len);
        i += len;
        gap = i;
    }
    if (gap < cps.size()) pieces.emplace_back(gap, cps.size());
    return pieces;
}

}  // namespace ipex::llm::unicode
