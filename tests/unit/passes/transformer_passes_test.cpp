// decompose_transformer_layer (masks, nn.MultiheadAttention's fused op) and replace_matmul on
// frozen scripted modules: op counts before and after, outputs against the unmodified graph.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/decompose_transformer_layer.h"
#include "passes/replace_matmul.h"
#include <torch/csrc/jit/passes/dead_code_elimination.h>

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

constexpr int64_t kEmbed = 24, kHeads = 3, kFfn = 40;

void expect_same_outputs(const GraphPtr &original, const GraphPtr &optimized, const torch::jit::Module &self,
                         const std::vector<c10::IValue> &inputs, double tolerance = testing::kFp32Tolerance) {
    const auto want = testing::run_graph(original, self, inputs);
    const auto got = testing::run_graph(optimized, self, inputs);
    EXPECT_LE(testing::max_relative_error(got, want), tolerance) << *optimized;
}

testing::Params attention_params() {
    return {{"qkv_weight", at::randn({3 * kEmbed, kEmbed}) * 0.2}, {"qkv_bias", at::randn({3 * kEmbed}) * 0.1},
            {"proj_weight", at::randn({kEmbed, kEmbed}) * 0.2},    {"proj_bias", at::randn({kEmbed}) * 0.1},
            {"norm_weight_1", at::rand({kEmbed}) + 0.5},           {"norm_bias_1", at::randn({kEmbed}) * 0.1},
            {"norm_weight_2", at::rand({kEmbed}) + 0.5},           {"norm_bias_2", at::randn({kEmbed}) * 0.1},
            {"ffn_weight_1", at::randn({kFfn, kEmbed}) * 0.2},     {"ffn_bias_1", at::randn({kFfn}) * 0.1},
            {"ffn_weight_2", at::randn({kEmbed, kFfn}) * 0.2},     {"ffn_bias_2", at::randn({kEmbed}) * 0.1}};
}

// torch._transformer_encoder_layer_fwd with the mask argument `mask` ("None" or an input name)
// and mask_type.
torch::jit::Module encoder_layer(bool gelu, bool norm_first, const std::string &mask, const std::string &mask_type) {
    const std::string flags = std::string(gelu ? "True" : "False") + ", " + (norm_first ? "True" : "False");
    const std::string source =
        std::string("def forward(self, x") + (mask == "None" ? "" : ", " + mask) + "):\n" +
        "    return torch._transformer_encoder_layer_fwd(x, " + std::to_string(kEmbed) + ", " +
        std::to_string(kHeads) + ", self.qkv_weight, self.qkv_bias, self.proj_weight, self.proj_bias, " + flags +
        ", 1e-5, self.norm_weight_1, self.norm_bias_1, self.norm_weight_2, self.norm_bias_2, self.ffn_weight_1, "
        "self.ffn_bias_1, self.ffn_weight_2, self.ffn_bias_2, " +
        mask + ", " + mask_type + ")\n";
    return testing::make_module("EncoderLayer", source, attention_params());
}

// torch._native_multi_head_attention on (q, k, v) inputs; returns both outputs, or only the
// attention output when `both` is false.
torch::jit::Module multi_head_attention(const std::string &args, const std::string &mask, const std::string &mask_type,
                                        bool need_weights, bool average, bool both = true) {
    const std::string source =
        "def forward(self, " + args + (mask == "None" ? "" : ", " + mask) + "):\n" +
        "    return torch._native_multi_head_attention(" + (args == "x" ? "x, x, x" : args) + ", " +
        std::to_string(kEmbed) + ", " + std::to_string(kHeads) +
        ", self.qkv_weight, self.qkv_bias, self.proj_weight, self.proj_bias, " + mask + ", " +
        (need_weights ? "True" : "False") + ", " + (average ? "True" : "False") + ", " + mask_type + ")" +
        (both ? "" : "[0]") + "\n";
    return testing::make_module("Attention", source, attention_params());
}

void set_input_types(GraphPtr &graph, const std::vector<c10::IValue> &inputs) {
    for (size_t i = 0; i < inputs.size(); ++i)
        graph->inputs()[i + 1]->setType(c10::TensorType::create(inputs[i].toTensor()));
}

at::Tensor key_padding(int64_t batch, int64_t length) {
    at::Tensor pad = at::zeros({batch, length}, at::kBool);
    for (int64_t b = 0; b < batch; ++b) pad.slice(1, length - b % length).fill_(true);  // row b: b pads
    return pad;
}

struct LayerCase {
    bool gelu, norm_first;
    std::string mask;  // none, bool, float_inf (-inf where padded), float_large (-1e4 where padded)
};

class DecomposeLayer : public ::testing::TestWithParam<LayerCase> {};

TEST_P(DecomposeLayer, MatchesTheFusedOp) {
    at::manual_seed(1);
    const LayerCase c = GetParam();
    const int64_t batch = 3, length = 7;
    std::vector<c10::IValue> inputs{at::randn({batch, length, kEmbed})};
    std::string mask = "None", mask_type = "None";
    if (c.mask != "none") {
        // libtorch's kernel reads any nonzero mask element as "masked".
        mask = "mask";
        mask_type = "1";
        at::Tensor m = key_padding(batch, length);
        if (c.mask == "float_inf") m = at::zeros(m.sizes()).masked_fill(m, -std::numeric_limits<float>::infinity());
        if (c.mask == "float_large") m = at::zeros(m.sizes()).masked_fill(m, -1e4);
        inputs.push_back(m);
    }
    auto frozen = testing::freeze(encoder_layer(c.gelu, c.norm_first, mask, mask_type));
    set_input_types(frozen.graph, inputs);
    const GraphPtr original = frozen.graph->copy();
    const PassResult r = decompose_transformer_layer(frozen.graph);
    EXPECT_EQ(r.count, 1);
    EXPECT_TRUE(r.skipped.empty()) << r.skipped.at(0);
    EXPECT_EQ(testing::count(frozen.graph, "aten::_transformer_encoder_layer_fwd"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 4);
    EXPECT_EQ(testing::count(frozen.graph, "aten::matmul"), 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::softmax"), 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::layer_norm"), 2);
    EXPECT_EQ(testing::count(frozen.graph, c.gelu ? "aten::gelu" : "aten::relu"), 1);
    // The fused op leaves padded rows of a key-padding mask as garbage in places; compare the rest.
    expect_same_outputs(original, frozen.graph, frozen.module, inputs);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, DecomposeLayer,
    ::testing::Values(LayerCase{false, false, "none"}, LayerCase{true, false, "none"}, LayerCase{false, true, "none"},
                      LayerCase{true, true, "none"}, LayerCase{true, false, "bool"}, LayerCase{false, true, "bool"},
                      LayerCase{true, false, "float_inf"}, LayerCase{true, true, "float_large"}),
    [](const ::testing::TestParamInfo<LayerCase> &info) {
        return std::string(info.param.gelu ? "gelu" : "relu") + (info.param.norm_first ? "_pre_" : "_post_") +
               info.param.mask;
    });

TEST(DecomposeLayerUnknownTypes, AGraphLoadedFromAFileIsDecomposed) {
    // Graphs read back from a file know no ranks or dtypes: the fast path only ever ran on 3-D
    // input, and the mask's dtype is decided at run time.
    at::manual_seed(5);
    auto frozen = testing::freeze(encoder_layer(true, false, "mask", "1"));
    const GraphPtr original = frozen.graph->copy();
    const PassResult r = decompose_transformer_layer(frozen.graph);
    EXPECT_EQ(r.count, 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::_transformer_encoder_layer_fwd"), 0);
    const at::Tensor x = at::randn({2, 5, kEmbed});
    const at::Tensor pad = key_padding(2, 5);
    expect_same_outputs(original, frozen.graph, frozen.module, {x, pad});
    expect_same_outputs(original, frozen.graph, frozen.module,
                        {x, at::zeros({2, 5}).masked_fill(pad, -std::numeric_limits<float>::infinity())});
}

TEST(DecomposeLayerKept, OtherRankOrIntegerMask) {
    auto frozen = testing::freeze(encoder_layer(false, true, "None", "None"));
    frozen.graph->inputs()[1]->setType(c10::TensorType::create(at::randn({5, kEmbed})));
    PassResult r = decompose_transformer_layer(frozen.graph);
    EXPECT_EQ(r.count, 0);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped[0].find("3-D"), std::string::npos) << r.skipped[0];

    auto masked = testing::freeze(encoder_layer(true, false, "mask", "1"));
    masked.graph->inputs()[2]->setType(c10::TensorType::create(at::zeros({2, 5}, at::kLong)));
    const std::string before = masked.graph->toString();
    r = decompose_transformer_layer(masked.graph);
    EXPECT_EQ(r.count, 0);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped[0].find("neither bool nor floating"), std::string::npos) << r.skipped[0];
    EXPECT_EQ(masked.graph->toString(), before);
}

struct AttentionCase {
    std::string args;  // "x" (self-attention) or "q, k, v"
    bool masked, need_weights, average;
};

class DecomposeAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(DecomposeAttention, MatchesTheFusedOp) {
    at::manual_seed(2);
    const AttentionCase c = GetParam();
    const int64_t batch = 2, length = 6, source_length = 6;  // libtorch's kernel wants equal shapes
    std::vector<c10::IValue> inputs;
    if (c.args == "x") {
        inputs.push_back(at::randn({batch, length, kEmbed}));
    } else {
        inputs = {at::randn({batch, length, kEmbed}), at::randn({batch, source_length, kEmbed}),
                  at::randn({batch, source_length, kEmbed})};
    }
    const int64_t keys = c.args == "x" ? length : source_length;
    if (c.masked) inputs.push_back(key_padding(batch, keys));
    auto frozen = testing::freeze(multi_head_attention(c.args, c.masked ? "mask" : "None", c.masked ? "1" : "None",
                                                       c.need_weights, c.average, c.need_weights));
    set_input_types(frozen.graph, inputs);
    const GraphPtr original = frozen.graph->copy();
    const PassResult r = decompose_transformer_layer(frozen.graph);
    EXPECT_EQ(r.count, 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::_native_multi_head_attention"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), c.args == "x" ? 2 : 4);
    EXPECT_EQ(testing::count(frozen.graph, "aten::matmul"), 2);
    // need_weights=False (as ViT calls it): the module returns the attention output alone.
    expect_same_outputs(original, frozen.graph, frozen.module, inputs);
}

INSTANTIATE_TEST_SUITE_P(Variants, DecomposeAttention,
                         ::testing::Values(AttentionCase{"x", false, true, true}, AttentionCase{"x", true, true, false},
                                           AttentionCase{"x", true, false, true},
                                           AttentionCase{"q, k, v", false, true, true},
                                           AttentionCase{"q, k, v", true, true, true}),
                         [](const ::testing::TestParamInfo<AttentionCase> &info) {
                             return std::string(info.param.args == "x" ? "self" : "cross") +
                                    (info.param.masked ? "_masked" : "") +
                                    (info.param.need_weights ? "" : "_no_weights") +
                                    (info.param.average ? "_averaged" : "_per_head");
                         });

TEST(DecomposeAttentionKept, UsedEmptyWeightsOfNeedWeightsFalse) {
    auto frozen = testing::freeze(multi_head_attention("x", "None", "None", false, true));
    set_input_types(frozen.graph, {at::randn({2, 4, kEmbed})});
    const PassResult r = decompose_transformer_layer(frozen.graph);
    EXPECT_EQ(r.count, 0);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped[0].find("need_weights"), std::string::npos) << r.skipped[0];
}

// ---- replace_matmul ----

torch::jit::Module matmul_module(const std::string &body, const std::string &args) {
    testing::Params params = {{"w", at::randn({16, 12}) * 0.3}, {"b", at::randn({12})}, {"w3", at::randn({2, 16, 12})}};
    return testing::make_module("Mm", "def forward(self, " + args + "):\n" + body, params);
}

struct MatmulCase {
    std::string name, body, args;
    std::vector<std::vector<int64_t>> shapes;
    int linears, ipex_matmuls, kept;
};

class ReplaceMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(ReplaceMatmul, CountsAndOutputs) {
    at::manual_seed(4);
    const MatmulCase c = GetParam();
    auto frozen = testing::freeze(matmul_module(c.body, c.args));
    std::vector<c10::IValue> inputs;
    for (const auto &s : c.shapes) inputs.push_back(at::randn(s));
    const GraphPtr original = frozen.graph->copy();
    const PassResult r = replace_matmul(frozen.graph);
    EXPECT_EQ(r.count, c.linears + c.ipex_matmuls);
    EXPECT_EQ(static_cast<int>(r.skipped.size()), c.kept);
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), c.linears) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::matmul"), c.ipex_matmuls) << *frozen.graph;
    for (const char *kind : {"aten::matmul", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::einsum"})
        if (c.kept == 0) EXPECT_EQ(testing::count(frozen.graph, kind), 0) << kind;
    expect_same_outputs(original, frozen.graph, frozen.module, inputs, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, ReplaceMatmul,
    ::testing::Values(
        MatmulCase{"matmul_constant", "    return torch.matmul(x, self.w)\n", "x", {{3, 5, 16}}, 1, 0, 0},
        MatmulCase{"mm_constant", "    return torch.mm(x, self.w)\n", "x", {{5, 16}}, 1, 0, 0},
        MatmulCase{"addmm_conv1d", "    return torch.addmm(self.b, x.view(-1, 16), self.w)\n", "x", {{2, 3, 16}}, 1, 0, 0},
        MatmulCase{"addmm_scaled", "    return torch.addmm(self.b, x, self.w, beta=0.5)\n", "x", {{4, 16}}, 0, 0, 1},
        MatmulCase{"attention", "    return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)), -1), v)\n",
                   "q, k, v", {{2, 3, 7, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}}, 0, 2, 0},
        MatmulCase{"bmm", "    return torch.bmm(a, b)\n", "a, b", {{4, 5, 6}, {4, 6, 3}}, 0, 1, 0},
        MatmulCase{"constant_batched", "    return torch.matmul(x, self.w3)\n", "x", {{2, 5, 16}}, 0, 1, 0},
        MatmulCase{"baddbmm", "    return torch.baddbmm(c, a, b, beta=0.5, alpha=2.0)\n", "a, b, c",
                   {{4, 5, 6}, {4, 6, 3}, {4, 5, 3}}, 0, 1, 0},
        MatmulCase{"einsum_qk", "    return torch.einsum('bhld,bhsd->bhls', q, k)\n", "q, k",
                   {{2, 3, 7, 8}, {2, 3, 9, 8}}, 0, 1, 0},
        MatmulCase{"einsum_permuted", "    return torch.einsum('blhd,bshd->bhls', q, k)\n", "q, k",
                   {{2, 7, 3, 8}, {2, 9, 3, 8}}, 0, 1, 0},
        MatmulCase{"einsum_sum_only", "    return torch.einsum('ij,jk->i', a, b)\n", "a, b", {{3, 4}, {4, 5}}, 0, 0, 1}),
    [](const ::testing::TestParamInfo<MatmulCase> &info) { return info.param.name; });

// Linears whose weight is computed at run time (nn.MultiheadAttention's cross-attention splits
// its packed in-projection by the query's size) go to ipex::matmul with the bias added; a
// linear without bias adds nothing.
TEST(RemainingLinears, NonConstantWeightsRunAsIpexMatmul) {
    at::manual_seed(8);
    auto frozen = testing::freeze(testing::make_module(
        "Cross",
        "def forward(self, q, kv):\n"
        "    e = q.size(-1)\n"
        "    w_q, w_kv = self.w.split([e, e * 2])\n"
        "    b_q, b_kv = self.b.split([e, e * 2])\n"
        "    return torch.linear(q, w_q, b_q), torch.linear(kv, w_kv)\n",
        {{"w", at::randn({48, 16}) * 0.3}, {"b", at::randn({48})}}));
    const GraphPtr original = frozen.graph->copy();
    ASSERT_EQ(testing::count(original, "aten::linear"), 2) << *original;
    const PassResult r = remaining_linears_to_matmul(frozen.graph);
    torch::jit::EliminateDeadCode(frozen.graph);
    EXPECT_EQ(r.count, 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 0) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::matmul"), 2) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::add"), 1) << *frozen.graph;
    expect_same_outputs(original, frozen.graph, frozen.module, {at::randn({2, 5, 16}), at::randn({2, 7, 16})}, 1e-5);
}

}  // namespace
}  // namespace ipex::passes
