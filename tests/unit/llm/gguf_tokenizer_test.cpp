// GGUF's SentencePiece-style tokenizer ("llama") against sentencepiece itself: the fixture
// (tests/fixtures/gguf_fixtures.py) trains a BPE model with byte fallback, writes it into a GGUF
// file as llama.cpp's converter does and into a tokenizer.json by Hugging Face's converter rules,
// and records sentencepiece's ids for probe texts and its text for id lists. Both our paths
// must give the same. Malformed tokenizer metadata is exit 3 naming the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "base/errors.h"
#include "llm/gguf_tokenizer.h"
#include "llm/tokenizer.h"

namespace ipex::llm {
namespace {

const nlohmann::json &spm() {
    static const nlohmann::json j = [] {
        const char *dir = std::getenv("IPEX_FIXTURES");
        std::ifstream in(dir ? std::string(dir) + "/llm/llm.json" : std::string());
        nlohmann::json m;
        if (in) in >> m;
        return m.is_object() && m.contains("spm") ? m["spm"] : nlohmann::json();
    }();
    return j;
}

#define NEED_SPM()                                                                              \
    if (spm().is_null()) GTEST_SKIP() << "no fixtures: run make_llm_fixtures.py (ctest does)"; \
    if (spm().contains("skip")) GTEST_SKIP() << spm()["skip"].get<std::string>()

TEST(GgufTokenizer, EncodesAsSentencepiece) {
    NEED_SPM();
    for (const char *which : {"gguf", "dir"}) {
        const Tokenizer t = Tokenizer::load(spm()[which].get<std::string>());
        EXPECT_EQ(t.kind(), "sentencepiece");
        const auto &texts = spm()["texts"];
        for (size_t i = 0; i < texts.size(); ++i)
            EXPECT_EQ(t.encode(texts[i].get<std::string>()), spm()["ids"][i].get<std::vector<int32_t>>())
                << which << ": '" << texts[i].get<std::string>() << "'";
        // The empty text: BOS alone (nothing at all without special tokens), as llama.cpp and
        // sentencepiece give.
        EXPECT_EQ(t.encode(""), std::vector<int32_t>{1}) << which;
        EXPECT_TRUE(t.encode("", false).empty()) << which;
    }
}

TEST(GgufTokenizer, DecodesAsSentencepiece) {
    NEED_SPM();
    for (const char *which : {"gguf", "dir"}) {
        const Tokenizer t = Tokenizer::load(spm()[which].get<std::string>());
        for (const auto &c : spm()["decode"])
            EXPECT_EQ(t.decode(c["ids"].get<std::vector<int32_t>>()), c["text"].get<std::string>())
                << which << ": " << c["ids"].dump();
        for (const auto &text : spm()["texts"]) {  // round trip (BOS and the leading space dropped)
            const std::string s = text.get<std::string>();
            EXPECT_EQ(t.decode(t.encode(s)), s) << which;
        }
    }
}

TEST(GgufTokenizer, ConfigKeepsTheChatTemplate) {
    NEED_SPM();
    const nlohmann::json md = {{"tokenizer.ggml.model", "llama"},
                               {"tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"}},
                               {"tokenizer.ggml.bos_token_id", 1},
                               {"tokenizer.ggml.eos_token_id", 2},
                               {"tokenizer.chat_template", spm()["chat_template"]}};
    const nlohmann::json c = gguf_tokenizer_config(md, "t.gguf");
    EXPECT_EQ(c["chat_template"], spm()["chat_template"]);
    EXPECT_EQ(c["bos_token"], "<s>");
    EXPECT_EQ(c["eos_token"], "</s>");
    EXPECT_EQ(c["add_bos_token"], true);
    EXPECT_EQ(c["add_eos_token"], false);
}

// A small "llama" vocabulary: pieces and scores; "ab" outranks "bc" so "abc" is "ab" "c".
nlohmann::json small_llama() {
    nlohmann::json tokens = {"<unk>", "<s>", "</s>"}, scores = {0.0, 0.0, 0.0}, types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.push_back(name);
        scores.push_back(0.0);
        types.push_back(6);
    }
    for (const auto &[piece, score] : std::vector<std::pair<std::string, double>>{
             {"\xe2\x96\x81", -1}, {"a", -2}, {"b", -3}, {"c", -4}, {"ab", -5}, {"bc", -6}, {"\xe2\x96\x81" "ab", -7}}) {
        tokens.push_back(piece);
        scores.push_back(score);
        types.push_back(1);
    }
    return {{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.scores", scores},
            {"tokenizer.ggml.token_type", types}, {"tokenizer.ggml.bos_token_id", 1}, {"tokenizer.ggml.eos_token_id", 2},
            {"tokenizer.ggml.unknown_token_id", 0}};
}

// The exit code and message gguf_tokenizer_json gives the metadata.
std::pair<ExitCode, std::string> failure(const nlohmann::json &md) {
    try {
        gguf_tokenizer_json(md, "t.gguf");
    } catch (const Error &e) {
        return {e.code(), e.what()};
    }
    return {ExitCode::ok, ""};
}

int32_t id(const Tokenizer &t, const std::string &piece) { return t.id_of(piece); }

TEST(GgufTokenizer, MergesByScoreAndFallsBackToBytes) {
    nlohmann::json md = small_llama();
    const Tokenizer t = Tokenizer::parse(gguf_tokenizer_json(md, "t.gguf").dump(), "t.gguf");
    // "▁abc": ▁+a? no piece; a+b (score -5) before b+c (-6); then ▁+ab (-7).
    EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{1, id(t, "\xe2\x96\x81" "ab"), id(t, "c")}));
    // "z" is not a piece: its byte.
    EXPECT_EQ(t.encode("az", false), (std::vector<int32_t>{id(t, "\xe2\x96\x81"), id(t, "a"), id(t, "<0x7A>")}));
    EXPECT_EQ(t.decode(t.encode("abc az")), "abc az");
    // Without the space prefix and with EOS.
    md["tokenizer.ggml.add_space_prefix"] = false;
    md["tokenizer.ggml.add_eos_token"] = true;
    const Tokenizer u = Tokenizer::parse(gguf_tokenizer_json(md, "t.gguf").dump(), "t.gguf");
    EXPECT_EQ(u.encode("abc"), (std::vector<int32_t>{1, id(u, "ab"), id(u, "c"), 2}));
}

TEST(GgufTokenizer, MalformedMetadataNamesTheKey) {
    const auto bad = [](const std::string &key, const nlohmann::json &value, const std::string &words) {
        nlohmann::json md = small_llama();
        if (value.is_null()) md.erase(key);
        else md[key] = value;
        const auto [code, message] = failure(md);
        EXPECT_EQ(code, ExitCode::bad_input) << key << ": " << message;
        EXPECT_NE(message.find(key), std::string::npos) << message;
        EXPECT_NE(message.find(words), std::string::npos) << message;
    };
    bad("tokenizer.ggml.tokens", nullptr, "missing");
    bad("tokenizer.ggml.tokens", nlohmann::json::array(), "non-empty");
    bad("tokenizer.ggml.tokens", {"a", 3}, "entry 1");
    bad("tokenizer.ggml.scores", {1.0, 2.0}, "one per token");
    bad("tokenizer.ggml.token_type", {1}, "one per token");
    nlohmann::json types = small_llama()["tokenizer.ggml.token_type"];
    types[5] = 9;
    bad("tokenizer.ggml.token_type", types, "entry 5");
    bad("tokenizer.ggml.bos_token_id", 100000, "below the vocabulary");
    bad("tokenizer.ggml.bos_token_id", nullptr, "add_bos_token");
    bad("tokenizer.ggml.add_space_prefix", "yes", "boolean");
    nlohmann::json tokens = small_llama()["tokenizer.ggml.tokens"];
    tokens[3] = std::string(kMaxGgufPieceBytes + 1, 'x');
    bad("tokenizer.ggml.tokens", tokens, "limit");
    nlohmann::json md = small_llama();
    md["tokenizer.ggml.model"] = "t5";
    const auto [code, message] = failure(md);
    EXPECT_EQ(code, ExitCode::unsupported);
    EXPECT_NE(message.find("'t5'"), std::string::npos) << message;
}

}  // namespace
}  // namespace ipex::llm
