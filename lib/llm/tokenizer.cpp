#include "llm/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <deque>
#include <queue>

#include "base/bounded_file.h"
#include "base/errors.h"
#include "base/json_io.h"
#include "llm/config.h"
#include "llm/gguf_tokenizer.h"
#include "llm/tensor_source.h"

namespace ipex::llm {
namespace {

using json = nlohmann::json;
const std::string kSpaceMark = "\xe2\x96\x81";  // U+2581, SentencePiece's space

[[noreturn]] void fail(const std::string &source, const std::string &what) { throw_bad_input("'" + source + "': " + what); }
[[noreturn]] void unsupported(const std::string &source, const std::string &what) {
    throw_unsupported("'" + source + "': " + what);
}

// GPT-2's reversible map of bytes to printable code points.
const std::vector<char32_t> &byte_to_char() {
    static const std::vector<char32_t> table = [] {
        std::vector<char32_t> t(256);
        int extra = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
            t[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
        }
        return t;
    }();
    return table;
}

int char_to_byte(char32_t c) {
    static const std::map<char32_t, int> inverse = [] {
        std::map<char32_t, int> m;
        for (int b = 0; b < 256; ++b) m[byte_to_char()[static_cast<size_t>(b)]] = b;
        return m;
    }();
    const auto it = inverse.find(c);
    return it == inverse.end() ? -1 : it->second;
}

// The value of one hex digit, -1 for any other character.
int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string str(const json &j, const char *key, const std::string &source, const std::string &where) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) fail(source, "field '" + where + "." + key + "' must be a string");
    return it->get<std::string>();
}

bool flag(const json &j, const char *key, bool fallback) {
    const auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string type_of(const json &j, const std::string &source, const std::string &where) {
    if (!j.is_object()) fail(source, "field '" + where + "' must be an object");
    return str(j, "type", source, where);
}

std::string pattern_string(const json &j, const std::string &source, const std::string &where) {
    const auto it = j.find("pattern");
    if (it == j.end() || !it->is_object()) fail(source, "field '" + where + ".pattern' must be an object");
    if (it->contains("String")) return str(*it, "String", source, where + ".pattern");
    if (it->contains("Regex")) return "\x01" + str(*it, "Regex", source, where + ".pattern");
    fail(source, "field '" + where + ".pattern' has neither String nor Regex");
}

}  // namespace

Tokenizer Tokenizer::load(const std::string &dir) {
    if (is_gguf(dir)) {
        std::string text;
        try {
            text = gguf_tokenizer(dir).dump();
        } catch (const nlohmann::json::exception &) {  // a token that is not UTF-8
            throw_bad_input("GGUF file '" + dir + "': its tokenizer holds a token that is not UTF-8 text");
        }
        return parse(text, dir + " (GGUF tokenizer)");
    }
    const std::string path = dir + "/tokenizer.json";
    return parse(read_bounded_file(path, kMaxTokenizerBytes, "tokenizer.json"), path);
}

Tokenizer Tokenizer::parse(const std::string &text, const std::string &source) {
    json j = parse_json_object(text, source);
    Tokenizer t;
    const auto model = j.find("model");
    if (model == j.end()) fail(source, "field 'model' is missing");
    const std::string mtype = type_of(*model, source, "model");
    if (mtype != "BPE") unsupported(source, "tokenizer model '" + mtype + "' is not supported (supported: BPE)");
    const auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object()) fail(source, "field 'model.vocab' must be an object");
    if (static_cast<int64_t>(vocab->size()) > kMaxTokenizerVocab) fail(source, "'model.vocab' is too large");
    const auto add_token = [&](const std::string &token, const json &id_json, const std::string &where) {
        if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() >= kMaxTokenizerVocab)
            fail(source, "'" + where + "': id of '" + token + "' is not a valid token id");
        const auto id = static_cast<size_t>(id_json.get<int64_t>());
        if (t.tokens_.size() <= id) t.tokens_.resize(id + 1);
        t.tokens_[id] = token;
        t.vocab_[token] = static_cast<int32_t>(id);
    };
    for (auto it = vocab->begin(); it != vocab->end(); ++it) add_token(it.key(), it.value(), "model.vocab");
    const auto merges = model->find("merges");
    if (merges != model->end() && !merges->is_null()) {
        if (!merges->is_array()) fail(source, "field 'model.merges' must be a list");
        int32_t rank = 0;
        for (const auto &m : *merges) {
            std::string key;
            if (m.is_string()) key = m.get<std::string>();
            else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
                key = m[0].get<std::string>() + " " + m[1].get<std::string>();
            else fail(source, "'model.merges' entry " + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
            t.merges_.emplace(key, rank++);
        }
    }
    t.byte_fallback_ = flag(*model, "byte_fallback", false);
    t.ignore_merges_ = flag(*model, "ignore_merges", false);
    t.fuse_unk_ = flag(*model, "fuse_unk", false);
    if (model->contains("unk_token") && (*model)["unk_token"].is_string()) {
        const auto it = t.vocab_.find((*model)["unk_token"].get<std::string>());
        if (it != t.vocab_.end()) t.unk_ = it->second;
    }

    const auto added = j.find("added_tokens");
    if (added != j.end() && !added->is_null()) {
        if (!added->is_array()) fail(source, "field 'added_tokens' must be a list");
        for (const auto &a : *added) {
            if (!a.is_object() || !a.contains("id")) fail(source, "an 'added_tokens' entry has no id");
            const std::string content = str(a, "content", source, "added_tokens");
            if (content.empty()) fail(source, "an 'added_tokens' entry has empty content");
            add_token(content, a["id"], "added_tokens");
            const auto id = t.vocab_.at(content);
            if (t.special_.size() <= static_cast<size_t>(id)) t.special_.resize(static_cast<size_t>(id) + 1);
            t.special_[static_cast<size_t>(id)] = flag(a, "special", false);
            t.added_.emplace_back(content, id);
        }
        std::stable_sort(t.added_.begin(), t.added_.end(),
                         [](const auto &a, const auto &b) { return a.first.size() > b.first.size(); });
    }
    t.special_.resize(t.tokens_.size());

    // normalizer
    std::deque<const json *> stack;  // pointers into j: no subtree is copied
    if (j.contains("normalizer") && !j["normalizer"].is_null()) stack.push_back(&j["normalizer"]);
    while (!stack.empty()) {
        const json &n = *stack.front();
        stack.pop_front();
        const std::string type = type_of(n, source, "normalizer");
        if (type == "Sequence") {
            if (!n.contains("normalizers") || !n["normalizers"].is_array()) fail(source, "'normalizer.normalizers' must be a list");
            for (const auto &x : n["normalizers"]) stack.push_back(&x);
        } else if (type == "Prepend") {
            t.normalizer_prepend_ = str(n, "prepend", source, "normalizer");
        } else if (type == "Replace") {
            const std::string p = pattern_string(n, source, "normalizer");
            if (!p.empty() && p[0] == '\x01') unsupported(source, "normalizer Replace with a regex is not supported");
            t.replace_.emplace_back(p, str(n, "content", source, "normalizer"));
        } else if (type == "NFC") {
            t.nfc_ = true;
        } else {
            unsupported(source, "normalizer '" + type + "' is not supported (supported: Sequence, Prepend, Replace, NFC)");
        }
    }
    // pre-tokenizer
    if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) stack.push_back(&j["pre_tokenizer"]);
    while (!stack.empty()) {
        const json &p = *stack.front();
        stack.pop_front();
        const std::string type = type_of(p, source, "pre_tokenizer");
        if (type == "Sequence") {
            if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
                fail(source, "'pre_tokenizer.pretokenizers' must be a list");
            for (const auto &x : p["pretokenizers"]) stack.push_back(&x);
        } else if (type == "ByteLevel") {
            t.byte_level_ = true;
            t.add_prefix_space_ = flag(p, "add_prefix_space", false);
            t.byte_level_regex_ = flag(p, "use_regex", true);
        } else if (type == "Split") {
            const std::string pat = pattern_string(p, source, "pre_tokenizer");
            t.split_ = pat.empty() || pat[0] != '\x01' ? unicode::SplitPattern::none : unicode::identify_pattern(pat.substr(1));
            if (t.split_ == unicode::SplitPattern::none)
                unsupported(source, "pre_tokenizer Split pattern '" + pat.substr(pat.empty() ? 0 : 1) +
                                        "' is not supported (supported: the GPT-2, Llama 3 and Qwen2 patterns)");
        } else if (type == "Metaspace") {
            const std::string rep = p.contains("replacement") ? str(p, "replacement", source, "pre_tokenizer") : kSpaceMark;
            t.replace_.emplace_back(" ", rep);
            const std::string scheme = p.contains("prepend_scheme") && p["prepend_scheme"].is_string()
                                           ? p["prepend_scheme"].get<std::string>()
                                           : (flag(p, "add_prefix_space", true) ? "always" : "never");
            if (scheme != "never") t.prepend_ = rep;
            t.prepend_first_only_ = scheme == "first";
            t.metaspace_split_ = flag(p, "split", true);
        } else {
            unsupported(source, "pre_tokenizer '" + type + "' is not supported (supported: Sequence, ByteLevel, Split, Metaspace)");
        }
    }
    if (t.byte_level_ && t.split_ == unicode::SplitPattern::none && t.byte_level_regex_) t.split_ = unicode::SplitPattern::gpt2;
    t.kind_ = t.byte_level_ ? "byte-level" : "sentencepiece";

    // post-processor: the tokens around a single sequence.
    if (j.contains("post_processor") && !j["post_processor"].is_null()) stack.push_back(&j["post_processor"]);
    while (!stack.empty()) {
        const json &p = *stack.front();
        stack.pop_front();
        const std::string type = type_of(p, source, "post_processor");
        if (type == "Sequence") {
            if (!p.contains("processors") || !p["processors"].is_array()) fail(source, "'post_processor.processors' must be a list");
            for (const auto &x : p["processors"]) stack.push_back(&x);
        } else if (type == "TemplateProcessing") {
            if (!p.contains("single") || !p["single"].is_array()) fail(source, "'post_processor.single' must be a list");
            bool after = false;
            for (const auto &piece : p["single"]) {
                if (piece.contains("Sequence")) {
                    after = true;
                } else if (piece.contains("SpecialToken") && piece["SpecialToken"].is_object()) {
                    const std::string name = str(piece["SpecialToken"], "id", source, "post_processor.single");
                    const int32_t id = t.id_of(name);
                    if (id < 0) fail(source, "post_processor names the unknown token '" + name + "'");
                    (after ? t.suffix_ids_ : t.prefix_ids_).push_back(id);
                } else {
                    fail(source, "'post_processor.single' holds an entry that is neither Sequence nor SpecialToken");
                }
            }
        } else if (type != "ByteLevel") {
            unsupported(source, "post_processor '" + type + "' is not supported (supported: TemplateProcessing, ByteLevel, Sequence)");
        }
    }
    // decoder: only the leading-space strip needs configuring; the rest follows the kind.
    if (j.contains("decoder") && !j["decoder"].is_null()) stack.push_back(&j["decoder"]);
    while (!stack.empty()) {
        const json &d = *stack.front();
        stack.pop_front();
        const std::string type = type_of(d, source, "decoder");
        if (type == "Sequence") {
            if (!d.contains("decoders") || !d["decoders"].is_array()) fail(source, "'decoder.decoders' must be a list");
            for (const auto &x : d["decoders"]) stack.push_back(&x);
        } else if (type == "Strip") {
            const auto it = d.find("start");
            if (it != d.end() && it->is_number_integer()) t.strip_leading_ = static_cast<int>(std::clamp<int64_t>(it->get<int64_t>(), 0, 16));
        } else if (type == "Metaspace") {
            const std::string scheme = d.contains("prepend_scheme") && d["prepend_scheme"].is_string()
                                           ? d["prepend_scheme"].get<std::string>() : "always";
            if (scheme != "never" && flag(d, "add_prefix_space", true)) t.strip_leading_ = 1;
        } else if (type != "ByteLevel" && type != "Replace" && type != "ByteFallback" && type != "Fuse") {
            unsupported(source, "decoder '" + type + "' is not supported (supported: ByteLevel, Metaspace, Sequence, "
                                "Replace, ByteFallback, Fuse, Strip)");
        }
    }
    return t;
}

int32_t Tokenizer::id_of(const std::string &token) const {
    const auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
}

bool Tokenizer::is_special(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[static_cast<size_t>(id)];
}

std::vector<int32_t> Tokenizer::bpe(const std::vector<std::string> &symbols) const {
    std::vector<std::string> sym = symbols;
    const size_t n = sym.size();
    std::vector<int64_t> prev(n), next(n);
    for (size_t i = 0; i < n; ++i) {
        prev[i] = static_cast<int64_t>(i) - 1;
        next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
    }
    using Candidate = std::tuple<int32_t, int64_t, std::string, std::string>;  // rank, left, left sym, right sym
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    const auto consider = [&](int64_t left) {
        if (left < 0 || next[static_cast<size_t>(left)] < 0) return;
        const std::string &a = sym[static_cast<size_t>(left)], &b = sym[static_cast<size_t>(next[static_cast<size_t>(left)])];
        const auto it = merges_.find(a + " " + b);
        if (it != merges_.end()) heap.emplace(it->second, left, a, b);
    };
    for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int64_t>(i));
    while (!heap.empty()) {
        const auto [rank, left, a, b] = heap.top();
        heap.pop();
        const int64_t right = next[static_cast<size_t>(left)];
        if (right < 0 || sym[static_cast<size_t>(left)] != a || sym[static_cast<size_t>(right)] != b) continue;
        sym[static_cast<size_t>(left)] = a + b;
        sym[static_cast<size_t>(right)].clear();
        next[static_cast<size_t>(left)] = next[static_cast<size_t>(right)];
        if (next[static_cast<size_t>(right)] >= 0) prev[static_cast<size_t>(next[static_cast<size_t>(right)])] = left;
        consider(prev[static_cast<size_t>(left)]);
        consider(left);
    }
    std::vector<int32_t> ids;
    bool last_unk = false;
    for (int64_t i = n ? 0 : -1; i >= 0; i = next[static_cast<size_t>(i)]) {
        const std::string &s = sym[static_cast<size_t>(i)];
        const auto it = vocab_.find(s);
        if (it != vocab_.end()) {
            ids.push_back(it->second);
            last_unk = false;
            continue;
        }
        if (byte_fallback_) {
            bool all = true;
            std::vector<int32_t> bytes;
            for (unsigned char c : s) {
                char name[8];
                std::snprintf(name, sizeof name, "<0x%02X>", c);
                const int32_t id = id_of(name);
                if (id < 0) all = false;
                bytes.push_back(id);
            }
            if (all) {
                ids.insert(ids.end(), bytes.begin(), bytes.end());
                last_unk = false;
                continue;
            }
        }
        if (unk_ < 0) throw_bad_input("the tokenizer cannot encode '" + s + "' (no byte fallback and no unk_token)");
        if (!(fuse_unk_ && last_unk)) ids.push_back(unk_);
        last_unk = true;
    }
    return ids;
}

void Tokenizer::encode_segment(const std::string &segment, bool first, std::vector<int32_t> *out) const {
    std::vector<char32_t> cps;
    unicode::decode_utf8(segment, &cps);
    if (nfc_) {
        const std::u32string n = unicode::nfc(std::u32string(cps.begin(), cps.end()));
        cps.assign(n.begin(), n.end());
    }
    std::string text = unicode::to_utf8(cps, 0, cps.size());
    if (!byte_level_) {
        // The normalizer runs on each segment between added tokens: Prepend always adds its
        // mark (so text after a special token gets one too), Metaspace only where none is.
        if (!normalizer_prepend_.empty() && !text.empty()) text = normalizer_prepend_ + text;
        for (const auto &[from, to] : replace_) {
            std::string r;
            for (size_t i = 0; i < text.size();) {
                if (!from.empty() && text.compare(i, from.size(), from) == 0) {
                    r += to;
                    i += from.size();
                } else {
                    r += text[i++];
                }
            }
            text = std::move(r);
        }
        if (!prepend_.empty() && !text.empty() && (first || !prepend_first_only_) &&
            text.compare(0, prepend_.size(), prepend_) != 0)
            text = prepend_ + text;
        std::vector<std::string> words;
        if (metaspace_split_) {  // a new word at every space mark
            size_t start = 0;
            for (size_t i = kSpaceMark.size(); i <= text.size(); ++i)
                if (i == text.size() || text.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
                    if (i > start) words.push_back(text.substr(start, i - start));
                    start = i;
                    if (i == text.size()) break;
                }
        } else {
            words.push_back(text);
        }
        for (const auto &w : words) {
            std::vector<char32_t> wc;
            unicode::decode_utf8(w, &wc);
            std::vector<std::string> symbols;
            for (char32_t c : wc) symbols.push_back(unicode::to_utf8({c}, 0, 1));
            if (ignore_merges_ && vocab_.count(w)) out->push_back(vocab_.at(w));
            else for (int32_t id : bpe(symbols)) out->push_back(id);
        }
        return;
    }
    if (add_prefix_space_ && !cps.empty() && !unicode::is_space(cps[0]) && first) cps.insert(cps.begin(), U' ');
    std::vector<std::pair<size_t, size_t>> pieces =
        split_ == unicode::SplitPattern::none ? std::vector<std::pair<size_t, size_t>>{{0, cps.size()}}
                                              : unicode::split(cps, split_);
    for (const auto &[b, e] : pieces) {
        const std::string bytes = unicode::to_utf8(cps, b, e);
        std::vector<std::string> symbols;
        std::string whole;
        for (unsigned char c : bytes) {
            symbols.push_back(unicode::to_utf8({byte_to_char()[c]}, 0, 1));
            whole += symbols.back();
        }
        if (ignore_merges_ && vocab_.count(whole)) out->push_back(vocab_.at(whole));
        else for (int32_t id : bpe(symbols)) out->push_back(id);
    }
}

std::vector<int32_t> Tokenizer::encode(const std::string &text, bool add_special) const {
    std::vector<char32_t> check;
    if (!unicode::decode_utf8(text, &check)) throw_bad_input("the text is not valid UTF-8");
    std::vector<int32_t> ids;
    if (add_special) ids = prefix_ids_;
    size_t start = 0;
    bool first = true;
    for (size_t i = 0; i < text.size();) {
        const std::pair<std::string, int32_t> *hit = nullptr;
        for (const auto &a : added_)
            if (text.compare(i, a.first.size(), a.first) == 0) {
                hit = &a;
                break;
            }
        if (!hit) {
            ++i;
            continue;
        }
        if (i > start) encode_segment(text.substr(start, i - start), first, &ids);
        ids.push_back(hit->second);
        first = false;
        i += hit->first.size();
        start = i;
    }
    if (start < text.size()) encode_segment(text.substr(start), first, &ids);
    if (add_special) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
    return ids;
}

std::string Tokenizer::piece(int32_t id, bool first, bool skip_special) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return "";
    if (skip_special && is_special(id)) return "";
    const std::string &tok = tokens_[static_cast<size_t>(id)];
    std::string out;
    if (byte_level_) {
        std::vector<char32_t> cps;
        unicode::decode_utf8(tok, &cps);
        for (char32_t c : cps) {
            const int b = char_to_byte(c);
            if (b >= 0) out.push_back(static_cast<char>(b));
            else unicode::append_utf8(c, &out);
        }
        return out;
    }
    if (byte_fallback_ && tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>') {
        // Exactly two hex digits name a byte; any other "<0x..>" is an ordinary piece.
        const int hi = hex_digit(tok[3]), lo = hex_digit(tok[4]);
        if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
    }
    for (size_t i = 0; i < tok.size();) {
        if (tok.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
            out += ' ';
            i += kSpaceMark.size();
        } else {
            out += tok[i++];
        }
    }
    if (first)
        for (int k = 0; k < strip_leading_ && !out.empty() && out[0] == ' '; ++k) out.erase(0, 1);
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids, bool skip_special) const {
    StreamDecoder stream(*this);
    std::string out;
    for (int32_t id : ids) out += skip_special || !is_special(id) ? stream.push(id) : tokens_[static_cast<size_t>(id)];
    return out + stream.finish();
}

std::string StreamDecoder::push(int32_t id) {
    const std::string p = tokenizer_.piece(id, first_);
    // The leading-space strip is of the whole text: a first token that is only the stripped
    // space ends it too (skipped special tokens do not).
    if (first_ && (!p.empty() || !tokenizer_.piece(id, false).empty())) first_ = false;
    if (p.empty()) return "";
    pending_ += p;
    std::string out;
    for (;;) {
        bool invalid = false;
        const size_t n = unicode::complete_utf8_prefix(pending_, &invalid);
        out += pending_.substr(0, n);
        pending_.erase(0, n);
        if (!invalid) break;
        out += "\xef\xbf\xbd";  // U+FFFD for the invalid byte
        pending_.erase(0, 1);
    }
    return out;
}

std::string StreamDecoder::finish() {
    std::string out;
    if (!pending_.empty()) out = "\xef\xbf\xbd";
    pending_.clear();
    return out;
}

}  // namespace ipex::llm
