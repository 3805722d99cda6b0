// What a run may ask of a model (lib/llm/limits.h): the positions it declares, the count
// ranges, the memory check, tokenizer ids against vocab_size, and NaN logits in the sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "llm/generate.h"
#include "llm/limits.h"
#include "unit/test_errors.h"

namespace ipex::llm {
namespace {

// A tiny Llama config.json with `extra` fields appended (e.g. ,"max_position_embeddings":512).
ModelConfig config(const std::string &extra = ",\"max_position_embeddings\":512") {
    return parse_config(R"({"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,
      "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":100)" + extra + "}",
                        "config.json");
}

// The message of the ipex::Error fn throws with `code` ("" when it throws none or another).
std::string message_of(ExitCode code, const std::function<void()> &fn) {
    try {
        fn();
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), code) << e.what();
        return e.code() == code ? e.what() : "";
    }
    ADD_FAILURE() << "no error thrown";
    return "";
}

bool has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

TEST(LlmLimits, DeclaredPositions) {
    const ModelConfig plain = config();
    EXPECT_EQ(plain.position_limit, 512);
    EXPECT_EQ(plain.position_limit_source, "max_position_embeddings 512 (config.json)");
    // llama3: Hugging Face writes the extended length in max_position_embeddings.
    const ModelConfig llama3 = config(R"(,"max_position_embeddings":131072,"rope_scaling":{"rope_type":"llama3",
      "factor":8.0,"original_max_position_embeddings":8192})");
    EXPECT_EQ(llama3.position_limit, 131072);
    // linear: max_position_embeddings is the original length unless rope_scaling says otherwise.
    const ModelConfig linear = config(R"(,"max_position_embeddings":4096,"rope_scaling":{"type":"linear","factor":4.0})");
    EXPECT_EQ(linear.position_limit, 16384);
    EXPECT_TRUE(has(linear.position_limit_source, "max_position_embeddings 4096 x rope_scaling.factor 4")) << linear.position_limit_source;
    EXPECT_EQ(config(R"(,"max_position_embeddings":4096,"rope_scaling":{"type":"linear","factor":4.0,
      "original_max_position_embeddings":4096})").position_limit, 16384);
    EXPECT_EQ(config(R"(,"max_position_embeddings":16384,"rope_scaling":{"type":"linear","factor":4.0,
      "original_max_position_embeddings":4096})").position_limit, 16384);
    EXPECT_EQ(config(R"(,"max_position_embeddings":4096,"rope_scaling":{"type":"linear","factor":0.5})").position_limit, 4096);
    EXPECT_EQ(config(R"(,"max_position_embeddings":4096,"rope_scaling":{"type":"linear","factor":100000})").position_limit,
              kMaxPositions);
    const ModelConfig unstated = config("");
    EXPECT_EQ(unstated.position_limit, 2048);
    EXPECT_TRUE(has(unstated.position_limit_source, "does not state it")) << unstated.position_limit_source;
    // A sliding window does not change what the model declares.
    EXPECT_EQ(parse_config(R"({"architectures":["MistralForCausalLM"],"hidden_size":64,"intermediate_size":128,
      "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"max_position_embeddings":512,
      "sliding_window":8})", "config.json").position_limit, 512);
}

TEST(LlmLimits, CountsAndPositions) {
    EXPECT_EQ(message_of(ExitCode::usage, [] { check_count("--batch", 5000, counts::batch); }),
              "--batch must be in [1, 4096], got 5000");
    EXPECT_EQ(testing::code_of([] { check_count("--batch", 4096, counts::batch); }), ExitCode::ok);
    const ModelConfig c = config();
    EXPECT_FALSE(check_positions(c, 512, "x", false));
    const std::string m = message_of(ExitCode::usage, [&] { check_positions(c, 513, "--context 513", false); });
    EXPECT_TRUE(has(m, "--context 513 needs 513 positions; the model declares max_position_embeddings 512 (config.json); "
                       "pass --allow-long-context")) << m;
    EXPECT_TRUE(check_positions(c, 513, "x", true));
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_positions(c, kMaxPositions + 1, "x", true); }),
                    std::to_string(kMaxPositions)));
}

TEST(LlmLimits, GenerateRequest) {
    const ModelConfig c = config();
    GenerateOptions o;
    o.max_new_tokens = 10000000;
    const std::vector<std::vector<int32_t>> prompt300 = {std::vector<int32_t>(300, 5)};
    EXPECT_EQ(message_of(ExitCode::usage, [&] { check_generate(c, prompt300, o); }),
              "prompt (300 tokens) + --max-new-tokens 10000000 needs 10000300 positions; the model declares "
              "max_position_embeddings 512 (config.json); pass --allow-long-context to go past it (up to 16777216)");
    // 10^8 names the option given, not --max-length.
    o.max_new_tokens = 100000000;
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_generate_options(o); }),
                    "--max-new-tokens must be in [0, 16777216], got 100000000"));
    // --max-length smaller than prompt + new tokens is what the run needs, and is named.
    o.max_new_tokens = 1000;
    o.max_length = 600;
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_generate(c, prompt300, o); }), "--max-length 600 needs 600"));
    // The cache never holds more than the run can use.
    o.max_length = 100000;
    o.max_new_tokens = 12;
    EXPECT_EQ(check_generate(c, prompt300, o), 312);
    o.max_length = 0;
    o.max_new_tokens = 1000;
    o.allow_long_context = true;
    EXPECT_EQ(check_generate(c, prompt300, o), 1300);
    // Prompt ids outside the vocabulary are the user's: exit 2 naming --prompt-ids.
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_generate(c, {{1, 2}, {3, 100}}, o); }),
                    "prompt 2: token id 100 is outside the model's vocabulary [0, 100)"));
    EXPECT_TRUE(has(message_of(ExitCode::usage,
                               [&] { check_generate(c, std::vector<std::vector<int32_t>>(4097, {1}), o); }),
                    "must be in [1, 4096], got 4097"));
    o.sampling.greedy = false;
    o.sampling.top_k = -1;
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_generate_options(o); }), "--top-k must be in [0, "));
}

TEST(LlmLimits, BenchAndPerplexityRequests) {
    const ModelConfig c = config();
    LlmBenchOptions b;
    b.input_tokens = 2000000000;
    EXPECT_EQ(message_of(ExitCode::usage, [&] { check_bench_llm(c, b); }),
              "--input-tokens must be in [1, 16777216], got 2000000000");
    b.input_tokens = 500;
    b.output_tokens = 100;
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_bench_llm(c, b); }),
                    "--input-tokens 500 + --output-tokens 100 needs 600 positions"));
    b.input_tokens = 16;
    b.batch = 0;
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_bench_llm(c, b); }), "--batch must be in [1, 4096], got 0"));
    // Past every machine's memory: the KV cache of 4096 sequences of 16M positions.
    b.batch = 4096;
    b.input_tokens = kMaxPositions - 1;
    b.output_tokens = 1;
    b.allow_long_context = true;
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_bench_llm(c, b); }), "of memory"));

    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_perplexity(c, 2048, 1024, false); }),
                    "--context 2048 needs 2048 positions; the model declares max_position_embeddings 512"));
    EXPECT_EQ(testing::code_of([&] { check_perplexity(c, 2048, 1024, true); }), ExitCode::ok);
    EXPECT_TRUE(has(message_of(ExitCode::usage, [&] { check_perplexity(c, 64, 65, false); }), "--stride 65"));
    EXPECT_EQ(default_context(c), 512);
    EXPECT_EQ(default_context(config(",\"max_position_embeddings\":128")), 128);
}

TEST(LlmLimits, TokenizerIdsBeyondVocabSize) {
    const ModelConfig c = config();  // vocab_size 100
    const auto tokenizer = [](const std::string &vocab, const std::string &added) {
        return Tokenizer::parse(R"({"model":{"type":"BPE","vocab":{)" + vocab + R"(},"merges":[]},"added_tokens":[)" +
                                    added + "]}",
                                "tokenizer.json");
    };
    EXPECT_EQ(testing::code_of([&] { check_tokenizer_vocab(tokenizer(R"("a":0,"b":99)", ""), c, "tokenizer.json"); }),
              ExitCode::ok);
    const std::string added = message_of(ExitCode::bad_input, [&] {
        check_tokenizer_vocab(tokenizer(R"("a":0)", R"({"id":5002,"content":"<extra>","special":true})"), c,
                              "tokenizer.json");
    });
    for (const char *part : {"'tokenizer.json'", "5002", "<extra>", "added_tokens", "vocab_size 100"})
        EXPECT_TRUE(has(added, part)) << added;
    const std::string vocab =
        message_of(ExitCode::bad_input, [&] { check_tokenizer_vocab(tokenizer(R"("a":0,"zz":100)", ""), c, "t.json"); });
    EXPECT_TRUE(has(vocab, "token id 100 ('zz', model.vocab)")) << vocab;

    GenerationDefaults g;
    g.eos_token_ids = {2, 150};
    const std::string eos = message_of(ExitCode::bad_input, [&] { check_generation_ids(g, c, "generation_config.json"); });
    EXPECT_TRUE(has(eos, "'generation_config.json': field 'eos_token_id' = 150")) << eos;
}

TEST(LlmLimits, SamplerPicksNothingFromNonFiniteLogits) {
    std::vector<float> logits(100, 0.f);
    logits[7] = 3.f;
    for (bool greedy : {true, false}) {
        SamplingOptions o;
        o.greedy = greedy;
        Sampler s(o, 100);
        EXPECT_EQ(s.next(logits.data(), {}), 7);
        std::vector<float> nan = logits;
        nan[0] = std::numeric_limits<float>::quiet_NaN();  // compared false, it used to win as token 0
        EXPECT_EQ(s.next(nan.data(), {}), kNoToken);
        std::vector<float> inf = logits;
        inf[50] = std::numeric_limits<float>::infinity();
        EXPECT_EQ(s.next(inf.data(), {}), kNoToken);
    }
    EXPECT_TRUE(all_finite(logits.data(), 100));
}

}  // namespace
}  // namespace ipex::llm
