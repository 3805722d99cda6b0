#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "llm/tokenizer.h"
#include "llm/unicode.h"
#include "unit/test_errors.h"

namespace ipex::llm {
namespace {

std::vector<std::string> pieces(const std::string &text, unicode::SplitPattern p) {
    std::vector<char32_t> cps;
    EXPECT_TRUE(unicode::decode_utf8(text, &cps));
    std::vector<std::string> out;
    for (const auto &[b, e] : unicode::split(cps, p)) out.push_back(unicode::to_utf8(cps, b, e));
    return out;
}

TEST(LlmTokenizer, Gpt2Split) {
    EXPECT_EQ(pieces("Hello world's  123!!", unicode::SplitPattern::gpt2),
              (std::vector<std::string>{"Hello", " world", "'s", " ", " 123", "!!"}));
}

TEST(LlmTokenizer, Llama3AndQwen2Split) {
    EXPECT_EQ(pieces("Hello  world\n\n  123456 WE'LL", unicode::SplitPattern::llama3),
              (std::vector<std::string>{"Hello", " ", " world", "\n\n", " ", " ", "123", "456", " WE", "'LL"}));
    EXPECT_EQ(pieces("ab 12", unicode::SplitPattern::qwen2), (std::vector<std::string>{"ab", " ", "1", "2"}));
    EXPECT_EQ(pieces("\xe4\xbd\xa0\xe5\xa5\xbd!", unicode::SplitPattern::llama3),
              (std::vector<std::string>{"\xe4\xbd\xa0\xe5\xa5\xbd", "!"}));
}

// A byte-level tokenizer of the 256 byte symbols and one merge.
std::string byte_level_json() {
    nlohmann::json vocab = nlohmann::json::object();
    const auto chars = [] {
        std::vector<int> bs;
        for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
        for (int b = 0xa1; b <= 0xac; ++b) bs.push_back(b);
        for (int b = 0xae; b <= 0xff; ++b) bs.push_back(b);
        std::vector<char32_t> map(256);
        int extra = 0;
        for (int b = 0; b < 256; ++b)
            map[b] = std::find(bs.begin(), bs.end(), b) != bs.end() ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
        return map;
    }();
    for (int b = 0; b < 256; ++b) {
        std::string s;
        unicode::append_utf8(chars[static_cast<size_t>(b)], &s);
        vocab[s] = b;
    }
    vocab["he"] = 256;
    nlohmann::json j = {
        {"added_tokens", {{{"id", 257}, {"content", "<|eos|>"}, {"special", true}}}},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e"}}}},
    };
    return j.dump();
}

TEST(LlmTokenizer, ByteLevelEncodeDecodeAndSpecialTokens) {
    const Tokenizer t = Tokenizer::parse(byte_level_json(), "test");
    EXPECT_EQ(t.encode("hehe<|eos|>"), (std::vector<int32_t>{256, 256, 257}));
    const std::string text = "h\xc3\xa9 \xf0\x9f\x98\x80";
    const auto ids = t.encode(text);
    EXPECT_EQ(ids.size(), 8u);  // h, 2 bytes, space, 4 bytes
    EXPECT_EQ(t.decode(ids), text);
    EXPECT_EQ(t.decode({256, 257}), "he");
}

// Characters split across tokens are held back until complete, never cut.
TEST(LlmTokenizer, StreamingDecodeHoldsPartialCharacters) {
    const Tokenizer t = Tokenizer::parse(byte_level_json(), "test");
    const auto ids = t.encode("\xf0\x9f\x98\x80x");
    StreamDecoder s(t);
    EXPECT_EQ(s.push(ids[0]), "");
    EXPECT_EQ(s.push(ids[1]), "");
    EXPECT_EQ(s.push(ids[2]), "");
    EXPECT_EQ(s.push(ids[3]), "\xf0\x9f\x98\x80");
    EXPECT_EQ(s.push(ids[4]), "x");
    StreamDecoder bad(t);
    EXPECT_EQ(bad.push(0xff) + bad.push('a' - 0), "\xef\xbf\xbd" + std::string(1, static_cast<char>(t.piece('a' - 0, false)[0])));
}

TEST(LlmTokenizer, SentencePieceByteFallback) {
    nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        vocab[name] = 2 + b;
    }
    vocab["\xe2\x96\x81"] = 258;
    vocab["a"] = 259;
    vocab["\xe2\x96\x81" "a"] = 260;
    nlohmann::json j = {
        {"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}}},
        {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}},
                                                               {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}}}}}},
        {"post_processor", {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}}}},
        {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\xe2\x96\x81"}}}, {"content", " "}},
                                                         {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                         {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\xe2\x96\x81 a"}}, {"byte_fallback", true}, {"unk_token", "<unk>"}}},
    };
    const Tokenizer t = Tokenizer::parse(j.dump(), "test");
    // "a é" -> <s> ▁a ▁ <0xC3> <0xA9>
    EXPECT_EQ(t.encode("a \xc3\xa9"), (std::vector<int32_t>{1, 260, 258, 2 + 0xc3, 2 + 0xa9}));
    EXPECT_EQ(t.decode(t.encode("a \xc3\xa9")), "a \xc3\xa9");
}

TEST(LlmTokenizer, ByteFallbackPiecesThatAreNotBytes) {
    // Pieces shaped like "<0xNN>" whose NN is not two hex digits are ordinary text, not a byte
    // (and not a crash): a vocabulary may hold any string.
    nlohmann::json vocab = {{"<unk>", 0}, {"<0x4a>", 1}, {"<0xZZ>", 2}, {"<0x-1>", 3}, {"<0x 1>", 4}, {"<0x+f>", 5}, {"<0xg1>", 6}};
    nlohmann::json j = {
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}, {"byte_fallback", true}, {"unk_token", "<unk>"}}},
    };
    const Tokenizer t = Tokenizer::parse(j.dump(), "test");
    EXPECT_EQ(t.piece(1, false), "J");
    EXPECT_EQ(t.piece(2, false), "<0xZZ>");
    EXPECT_EQ(t.piece(3, false), "<0x-1>");
    EXPECT_EQ(t.piece(4, false), "<0x 1>");
    EXPECT_EQ(t.piece(5, false), "<0x+f>");
    EXPECT_EQ(t.piece(6, false), "<0xg1>");
    EXPECT_EQ(t.decode({2, 1, 3}), "<0xZZ>J<0x-1>");
}

TEST(LlmTokenizer, MalformedAndUnsupportedFiles) {
    using testing::code_of;
    EXPECT_EQ(code_of([] { Tokenizer::parse("{", "t"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] { Tokenizer::parse("[]", "t"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] { Tokenizer::parse(R"({"model":{"type":"WordPiece","vocab":{}}})", "t"); }), ExitCode::unsupported);
    EXPECT_EQ(code_of([] { Tokenizer::parse(R"({"model":{"type":"BPE","vocab":{"a":-1}}})", "t"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] {
                  Tokenizer::parse(R"({"model":{"type":"BPE","vocab":{}},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"x+"}}})", "t");
              }),
              ExitCode::unsupported);
    const Tokenizer t = Tokenizer::parse(byte_level_json(), "test");
    EXPECT_EQ(code_of([&] { t.encode("bad \xff utf8"); }), ExitCode::bad_input);
}

}  // namespace
}  // namespace ipex::llm
