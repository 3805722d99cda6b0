#include <gtest/gtest.h>

#include <cmath>

#include "llm/config.h"
#include "unit/test_errors.h"

namespace ipex::llm {
namespace {

const char *kTiny = R"({"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,
  "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":100,"eos_token_id":[2,3],
  "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
  "original_max_position_embeddings":8192}})";

TEST(LlmConfig, ParsesLlama) {
    const ModelConfig c = parse_config(kTiny, "config.json");
    EXPECT_EQ(c.family, "llama");
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(c.rope_scaling.type, "llama3");
    EXPECT_FALSE(c.attention_bias);
}

TEST(LlmConfig, Errors) {
    using testing::code_of;
    std::string msg;
    try {
        parse_config(R"({"architectures":["FalconForCausalLM"]})", "c");
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::unsupported);
        msg = e.what();
    }
    EXPECT_NE(msg.find("FalconForCausalLM"), std::string::npos);
    EXPECT_NE(msg.find("Qwen2ForCausalLM"), std::string::npos);
    std::string no_hidden = kTiny;
    no_hidden.replace(no_hidden.find("\"hidden_size\""), 17, "\"hidden\":64");
    EXPECT_EQ(code_of([&] { parse_config(no_hidden, "c"); }), ExitCode::bad_input);
    std::string bad_heads = kTiny;
    bad_heads.replace(bad_heads.find("\"num_key_value_heads\":2"), 23, "\"num_key_value_heads\":3");
    EXPECT_EQ(code_of([&] { parse_config(bad_heads, "c"); }), ExitCode::bad_input);
    std::string other = kTiny;
    other.replace(other.find("llama3"), 6, "mrope");
    EXPECT_EQ(code_of([&] { parse_config(other, "c"); }), ExitCode::unsupported);
    // yarn: its attention factor 0.1 ln(factor) + 1; beta_fast must exceed beta_slow.
    std::string yarn = kTiny;
    yarn.replace(yarn.find("llama3"), 6, "yarn");
    EXPECT_NEAR(parse_config(yarn, "c").rope_scaling.attention_factor, 0.1 * std::log(8.0) + 1, 1e-12);
    std::string betas = yarn;
    betas.replace(betas.find("\"factor\""), 8, "\"beta_fast\":1,\"beta_slow\":2,\"factor\"");
    EXPECT_EQ(code_of([&] { parse_config(betas, "c"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] { parse_config("{\"architectures\": 5}", "c"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] { parse_config("[1,2]", "c"); }), ExitCode::bad_input);
    std::string huge = kTiny;
    huge.replace(huge.find("\"vocab_size\":100"), 16, "\"vocab_size\":99999999999");
    EXPECT_EQ(code_of([&] { parse_config(huge, "c"); }), ExitCode::bad_input);
}

}  // namespace
}  // namespace ipex::llm
