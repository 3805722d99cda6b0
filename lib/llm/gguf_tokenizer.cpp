#include "llm/gguf_tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>
#include <unordered_map>

#include "base/errors.h"
#include "base/json_io.h"
#include "checkpoint/gguf.h"
#include "llm/tensor_source.h"
#include "llm/tokenizer.h"

namespace ipex::llm {
namespace {

using json = nlohmann::json;
const std::string kSpaceMark = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int64_t { undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// Typed access to the tokenizer metadata: a present field of the wrong type or range is exit 3
// naming the key.
class Meta {
public:
    Meta(const json &md, const std::string &path) : md_(md), path_(path) {}

    [[noreturn]] void fail(const std::string &key, const std::string &what) const {
        throw_bad_input("GGUF file '" + path_ + "': '" + key + "' " + what);
    }
    const json *find(const std::string &key) const {
        const auto it = md_.find(key);
        return it == md_.end() ? nullptr : &*it;
    }
    bool flag(const std::string &key, bool fallback) const {
        const json *v = find(key);
        if (!v) return fallback;
        if (!v->is_boolean()) fail(key, "is not a boolean");
        return v->get<bool>();
    }
    std::string text(const std::string &key, const std::string &fallback) const {
        const json *v = find(key);
        if (!v) return fallback;
        if (!v->is_string()) fail(key, "is not a string");
        return v->get<std::string>();
    }
    // A token id below `vocab`, or -1 when absent.
    int64_t id(const std::string &key, size_t vocab) const {
        const json *v = find(key);
        if (!v) return -1;
        if (!v->is_number_integer()) fail(key, "is not an integer");
        const int64_t i = v->is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(v->get<uint64_t>(), INT64_MAX))
                                                  : v->get<int64_t>();
        if (i < 0 || static_cast<uint64_t>(i) >= vocab)
            fail(key, "is " + std::to_string(i) + ", not a token id below the vocabulary's " + std::to_string(vocab));
        return i;
    }
    // The token strings (required, non-empty, at most kMaxTokenizerVocab).
    const json &tokens() const {
        const std::string key = "tokenizer.ggml.tokens";
        const json *v = find(key);
        if (!v) fail(key, "is missing");
        if (!v->is_array() || v->empty()) fail(key, "is not a non-empty list");
        if (static_cast<int64_t>(v->size()) > kMaxTokenizerVocab)
            fail(key, "holds " + std::to_string(v->size()) + " tokens, more than the limit " + std::to_string(kMaxTokenizerVocab));
        for (size_t i = 0; i < v->size(); ++i)
            if (!(*v)[i].is_string()) fail(key, "entry " + std::to_string(i) + " is not a string");
        return *v;
    }
    // A per-token list (scores, token_type) of the vocabulary's length, or nullptr when absent.
    const json *per_token(const std::string &key, size_t vocab, bool integer) const {
        const json *v = find(key);
        if (!v) return nullptr;
        if (!v->is_array() || v->size() != vocab)
            fail(key, "must be a list of " + std::to_string(vocab) + " values (one per token)");
        for (size_t i = 0; i < v->size(); ++i) {
            const json &x = (*v)[i];
            if (integer ? !x.is_number_integer() : !x.is_number() || !std::isfinite(x.get<double>()))
                fail(key, "entry " + std::to_string(i) + " is not " + (integer ? "an integer" : "a finite number"));
        }
        return v;
    }

private:
    const json &md_;
    std::string path_;
};

int64_t type_of(const json *types, size_t i) { return types ? (*types)[i].get<int64_t>() : int64_t(normal); }

json added_token(size_t id, const std::string &content, bool special) {
    return {{"id", id},          {"content", content},     {"single_word", false}, {"lstrip", false},
            {"rstrip", false},   {"normalized", false},    {"special", special}};
}

// The post-processor: BOS before and EOS after the text as the flags say (none: null).
json template_processing(const json &tokens, int64_t bos, int64_t eos) {
    json single = json::array(), specials = json::object();
    const auto special = [&](int64_t id) {
        const std::string name = tokens[static_cast<size_t>(id)].get<std::string>();
        specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
        return json{{"SpecialToken", {{"id", name}, {"type_id", 0}}}};
    };
    if (bos >= 0) single.push_back(special(bos));
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (eos >= 0) single.push_back(special(eos));
    if (bos < 0 && eos < 0) return nullptr;
    return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", json::array()}, {"special_tokens", specials}};
}

json gpt2_tokenizer(const Meta &meta, const json &md, const std::string &path) {
    // The split patterns of the pre-tokenizers GGUF files name (those of the models' own
    // tokenizer.json files).
    static const std::map<std::string, std::string> patterns = {
        {"llama-bpe", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
        {"qwen2", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
        {"gpt2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"},
    };
    std::string pre = meta.text("tokenizer.ggml.pre", "gpt2");
    if (pre == "default") pre = "gpt2";
    const auto pattern = patterns.find(pre);
    if (pattern == patterns.end())
        throw_unsupported("GGUF file '" + path + "': pre-tokenizer '" + pre + "' is not known (supported: llama-bpe, "
                          "qwen2, gpt2)");
    const json &tokens = meta.tokens();
    const auto merges = md.find("tokenizer.ggml.merges");
    if (merges == md.end() || !merges->is_array()) meta.fail("tokenizer.ggml.merges", "is missing or not a list");
    const json *types = meta.per_token("tokenizer.ggml.token_type", tokens.size(), true);
    json vocab = json::object(), added = json::array(), pairs = json::array();
    for (size_t i = 0; i < tokens.size(); ++i) {
        vocab[tokens[i].get<std::string>()] = i;
        if (type_of(types, i) == control && !tokens[i].get<std::string>().empty())
            added.push_back(added_token(i, tokens[i].get<std::string>(), true));
    }
    for (size_t i = 0; i < merges->size(); ++i) {
        const json &m = (*merges)[i];
        const std::string text = m.is_string() ? m.get<std::string>() : std::string();
        const size_t space = text.find(' ');
        if (space == std::string::npos || space == 0 || space + 1 == text.size())
            meta.fail("tokenizer.ggml.merges", "entry " + std::to_string(i) + " is not two tokens separated by a space");
        pairs.push_back({text.substr(0, space), text.substr(space + 1)});
    }
    const int64_t bos = meta.flag("tokenizer.ggml.add_bos_token", false) ? meta.id("tokenizer.ggml.bos_token_id", tokens.size()) : -1;
    const int64_t eos = meta.flag("tokenizer.ggml.add_eos_token", false) ? meta.id("tokenizer.ggml.eos_token_id", tokens.size()) : -1;
    json post = template_processing(tokens, bos, eos);
    if (post.is_null())
        post = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", pre == "qwen2" ? json{{"type", "NFC"}} : json()},
            {"pre_tokenizer",
             {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"}, {"pattern", {{"Regex", pattern->second}}}, {"behavior", "Isolated"}, {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
            {"post_processor", post},
            {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
            {"model",
             {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
              {"ignore_merges", pre == "llama-bpe"}, {"vocab", vocab}, {"merges", pairs}}}};
}

// The number of bytes of the UTF-8 character starting with `lead` (1 for a stray byte).
size_t utf8_length(unsigned char lead) {
    if (lead >= 0xf0 && lead < 0xf8) return 4;
    if (lead >= 0xe0) return lead < 0xf0 ? 3 : 1;
    if (lead >= 0xc0) return 2;
    return 1;
}

json llama_tokenizer(const Meta &meta, const std::string &path) {
    const json &tokens = meta.tokens();
    const size_t n = tokens.size();
    const json *scores = meta.per_token("tokenizer.ggml.scores", n, false);
    const json *types = meta.per_token("tokenizer.ggml.token_type", n, true);
    for (size_t i = 0; types && i < n; ++i)
        if (type_of(types, i) < undefined || type_of(types, i) > byte)
            meta.fail("tokenizer.ggml.token_type", "entry " + std::to_string(i) + " is " + std::to_string(type_of(types, i)) +
                                                       ", not a token type 0-6");
    // llama.cpp's defaults for this kind: BOS added, EOS not, a space before the text.
    const bool add_bos = meta.flag("tokenizer.ggml.add_bos_token", true);
    const bool add_eos = meta.flag("tokenizer.ggml.add_eos_token", false);
    const bool space_prefix = meta.flag("tokenizer.ggml.add_space_prefix", true);
    int64_t unk = meta.id("tokenizer.ggml.unknown_token_id", n);
    const int64_t bos = meta.id("tokenizer.ggml.bos_token_id", n), eos = meta.id("tokenizer.ggml.eos_token_id", n);
    if (add_bos && bos < 0) meta.fail("tokenizer.ggml.bos_token_id", "is missing while add_bos_token is true");
    if (add_eos && eos < 0) meta.fail("tokenizer.ggml.eos_token_id", "is missing while add_eos_token is true");
    for (size_t i = 0; unk < 0 && types && i < n; ++i)
        if (type_of(types, i) == unknown) unk = static_cast<int64_t>(i);

    // The vocabulary, and control / unknown / user-defined tokens as added tokens (matched in
    // the text as they are, the first two special).
    json vocab = json::object(), added = json::array();
    std::unordered_map<std::string_view, size_t> index;
    index.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        const std::string &t = tokens[i].get_ref<const std::string &>();
        if (t.size() > kMaxGgufPieceBytes)
            meta.fail("tokenizer.ggml.tokens", "entry " + std::to_string(i) + " is " + std::to_string(t.size()) +
                                                   " bytes long, more than the limit " + std::to_string(kMaxGgufPieceBytes));
        vocab[t] = i;
        index[t] = i;
        const int64_t type = type_of(types, i);
        if ((type == control || type == unknown || type == user_defined) && !t.empty())
            added.push_back(added_token(i, t, type != user_defined));
    }
    // Merges: every split of a piece into two pieces of the vocabulary, ranked by the merged
    // piece's score (highest first; equal scores in id order, each piece's splits by the ids
    // of their halves), so the BPE rank order is llama.cpp's score order.
    struct Merge {
        float score;
        size_t left, right;
    };
    std::vector<Merge> merges;
    for (size_t i = 0; i < n; ++i) {
        const std::string &t = tokens[i].get_ref<const std::string &>();
        const size_t first = merges.size();
        for (size_t cut = utf8_length(static_cast<unsigned char>(t[0])); cut < t.size();
             cut += utf8_length(static_cast<unsigned char>(t[cut]))) {
            const auto l = index.find(std::string_view(t).substr(0, cut));
            const auto r = index.find(std::string_view(t).substr(cut));
            if (l != index.end() && r != index.end())
                merges.push_back({scores ? (*scores)[i].get<float>() : 0.0f, l->second, r->second});
        }
        std::sort(merges.begin() + static_cast<std::ptrdiff_t>(first), merges.end(),
                  [](const Merge &a, const Merge &b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
    }
    std::stable_sort(merges.begin(), merges.end(), [](const Merge &a, const Merge &b) { return a.score > b.score; });
    json pairs = json::array();
    for (const Merge &m : merges) pairs.push_back({tokens[m.left], tokens[m.right]});

    json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpaceMark}};
    json normalizer = space_prefix ? json{{"type", "Sequence"},
                                          {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpaceMark}}, replace}}}
                                   : replace;
    json decoders = {{{"type", "Replace"}, {"pattern", {{"String", kSpaceMark}}}, {"content", " "}},
                     {{"type", "ByteFallback"}},
                     {{"type", "Fuse"}}};
    if (space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    (void)path;
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", normalizer},
            {"pre_tokenizer", nullptr},
            {"post_processor", template_processing(tokens, add_bos ? bos : -1, add_eos ? eos : -1)},
            {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
            {"model",
             {{"type", "BPE"}, {"dropout", nullptr},
              {"unk_token", unk >= 0 ? tokens[static_cast<size_t>(unk)] : json()},
              {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
              {"byte_fallback", true}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", pairs}}}};
}

}  // namespace

nlohmann::json gguf_tokenizer_json(const nlohmann::json &md, const std::string &path) {
    const Meta meta(md, path);
    const std::string kind = meta.text("tokenizer.ggml.model", "");
    if (kind == "gpt2") return gpt2_tokenizer(meta, md, path);
    if (kind == "llama") return llama_tokenizer(meta, path);
    throw_unsupported("GGUF file '" + path + "': tokenizer kind '" + kind + "' is not read (supported: gpt2, the "
                      "byte-level BPE, and llama, SentencePiece's BPE); give --prompt-ids");
}

nlohmann::json gguf_tokenizer(const std::string &path) {
    const woq::GgufFile file(path);
    return gguf_tokenizer_json(file.metadata(), path);
}

nlohmann::json gguf_tokenizer_config(const nlohmann::json &md, const std::string &path) {
    const Meta meta(md, path);
    json c = json::object();
    const json *tokens = meta.find("tokenizer.ggml.tokens");
    if (tokens && tokens->is_array()) {
        const json &list = meta.tokens();
        for (const char *name : {"bos", "eos", "unk", "pad"}) {
            const std::string key = std::string("tokenizer.ggml.") + (name == std::string("unk") ? "unknown" : name) + "_token_id";
            const int64_t id = meta.id(key, list.size());
            if (id >= 0) c[std::string(name) + "_token"] = list[static_cast<size_t>(id)];
        }
    }
    const bool spm = meta.text("tokenizer.ggml.model", "") == "llama";
    if (meta.find("tokenizer.ggml.add_bos_token") || spm) c["add_bos_token"] = meta.flag("tokenizer.ggml.add_bos_token", spm);
    if (meta.find("tokenizer.ggml.add_eos_token") || spm) c["add_eos_token"] = meta.flag("tokenizer.ggml.add_eos_token", false);
    if (meta.find("tokenizer.chat_template")) c["chat_template"] = meta.text("tokenizer.chat_template", "");
    return c;
}

std::optional<std::string> chat_template(const std::string &model) {
    if (is_gguf(model)) {
        const woq::GgufFile file(model);
        const Meta meta(file.metadata(), model);
        if (!meta.find("tokenizer.chat_template")) return std::nullopt;
        return meta.text("tokenizer.chat_template", "");
    }
    const std::string path = model + "/tokenizer_config.json";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    const json c = read_json_object(path, kMaxTokenizerBytes, "tokenizer_config.json");
    const auto it = c.find("chat_template");
    if (it == c.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_array())
        for (const json &t : *it)
            if (t.is_object() && t.value("name", json()) == "default" && t.contains("template") && t["template"].is_string())
                return t["template"].get<std::string>();
    throw_bad_input("'" + path + "': field 'chat_template' is neither a string nor a list holding a \"default\" template");
}

}  // namespace ipex::llm
