// GGUF tensor names beside Hugging Face's, per architecture (llm/gguf_names.h): each name maps
// and maps back, experts to slices of their 3-D stacks, and names of another architecture or of
// no decoder part map to nothing.
#include <gtest/gtest.h>

#include "base/errors.h"
#include "llm/gguf_names.h"

namespace ipex::llm {
namespace {

void expect_pair(const std::string &arch, const std::string &hf, const std::string &gguf, int64_t expert = -1) {
    const GgufSlot s = gguf_slot(arch, hf);
    EXPECT_EQ(s.tensor, gguf) << arch << " " << hf;
    EXPECT_EQ(s.expert, expert) << arch << " " << hf;
    const auto back = gguf_hf_names(arch, gguf, 4);
    ASSERT_FALSE(back.empty()) << arch << " " << gguf;
    EXPECT_EQ(back[static_cast<size_t>(expert < 0 ? 0 : expert)], hf) << arch << " " << gguf;
}

TEST(GgufNames, EachArchitectureMapsBothWays) {
    expect_pair("llama", "model.embed_tokens.weight", "token_embd.weight");
    expect_pair("llama", "model.layers.1.post_attention_layernorm.weight", "blk.1.ffn_norm.weight");
    expect_pair("qwen2", "model.layers.0.self_attn.q_proj.bias", "blk.0.attn_q.bias");
    expect_pair("gemma2", "model.layers.3.post_attention_layernorm.weight", "blk.3.post_attention_norm.weight");
    expect_pair("gemma2", "model.layers.3.pre_feedforward_layernorm.weight", "blk.3.ffn_norm.weight");
    expect_pair("gemma3", "model.layers.0.post_feedforward_layernorm.weight", "blk.0.post_ffw_norm.weight");
    expect_pair("gemma3", "model.layers.0.self_attn.k_norm.weight", "blk.0.attn_k_norm.weight");
    expect_pair("phi3", "model.layers.2.self_attn.qkv_proj.weight", "blk.2.attn_qkv.weight");
    expect_pair("phi3", "model.layers.2.mlp.gate_up_proj.weight", "blk.2.ffn_up.weight");
    expect_pair("llama", "model.layers.1.block_sparse_moe.gate.weight", "blk.1.ffn_gate_inp.weight");
    expect_pair("llama", "model.layers.1.block_sparse_moe.experts.2.w3.weight", "blk.1.ffn_up_exps.weight", 2);
    expect_pair("llama", "model.layers.1.block_sparse_moe.experts.0.w2.weight", "blk.1.ffn_down_exps.weight", 0);
    expect_pair("qwen3moe", "model.layers.0.mlp.experts.3.gate_proj.weight", "blk.0.ffn_gate_exps.weight", 3);
    expect_pair("qwen2moe", "model.layers.0.mlp.shared_expert.up_proj.weight", "blk.0.ffn_up_shexp.weight");
    expect_pair("qwen2moe", "model.layers.0.mlp.shared_expert_gate.weight", "blk.0.ffn_gate_inp_shexp.weight");
    EXPECT_EQ(gguf_hf_names("qwen2moe", "blk.0.ffn_down_exps.weight", 4).size(), 4u);
    EXPECT_TRUE(is_expert_stack("blk.12.ffn_gate_exps.weight"));
    EXPECT_FALSE(is_expert_stack("blk.12.ffn_gate_inp.weight"));
    EXPECT_TRUE(is_rope_table("rope_factors_long.weight"));
}

TEST(GgufNames, OtherArchitecturesAndPartsMapToNothing) {
    EXPECT_TRUE(gguf_slot("qwen3moe", "model.layers.0.mlp.shared_expert.up_proj.weight").tensor.empty());
    EXPECT_TRUE(gguf_slot("phi3", "model.layers.0.self_attn.q_proj.weight").tensor.empty());
    EXPECT_TRUE(gguf_slot("llama", "model.layers.0.pre_feedforward_layernorm.weight").tensor.empty());
    EXPECT_TRUE(gguf_slot("llama", "model.layers.x.input_layernorm.weight").tensor.empty());
    EXPECT_TRUE(gguf_slot("llama", "model.layers.0.block_sparse_moe.experts.a.w1.weight").tensor.empty());
    EXPECT_TRUE(gguf_hf_names("gemma3", "v.patch_embd.weight", 4).empty());
    EXPECT_TRUE(gguf_hf_names("qwen3", "blk.0.ffn_gate_exps.weight", 4).empty());
}

TEST(GgufNames, ArchitectureClass) {
    using nlohmann::json;
    EXPECT_EQ(gguf_hf_architecture(json{{"general.architecture", "llama"}}, "f"), "LlamaForCausalLM");
    EXPECT_EQ(gguf_hf_architecture(json{{"general.architecture", "llama"}, {"llama.expert_count", 8}}, "f"),
              "MixtralForCausalLM");
    EXPECT_EQ(gguf_hf_architecture(json{{"general.architecture", "gemma3"}}, "f"), "Gemma3ForCausalLM");
    try {
        gguf_hf_architecture(json{{"general.architecture", "gemma"}}, "f.gguf");
        FAIL() << "no throw";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::unsupported);
        EXPECT_NE(std::string(e.what()).find("'gemma'"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace ipex::llm
