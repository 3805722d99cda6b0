// fuse_attention on frozen scripted modules written the ways models write attention (BERT,
// GPT-2 with its causal buffer, T5's position bias, masked_fill, bmm on [B*H, L, D], K
// permuted or already transposed, a traced in-place `+=`): ipex::attention and softmax counts
// before and after, outputs against the unmodified graph; and the forms it must leave alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/fuse_attention.h"

#include <torch/csrc/jit/passes/dead_code_elimination.h>

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

constexpr int64_t kB = 2, kH = 3, kL = 13, kD = 16;

struct AttentionCase {
    std::string name;
    std::string args;  // forward's arguments
    std::string body;  // forward's body
    std::vector<at::Tensor> inputs;
    int fused;          // ipex::attention nodes after the pass
    bool ranks = false;  // give the graph inputs their types (shape-specialized graph)
};

torch::jit::Module attention_module(const AttentionCase &c) {
    const at::Tensor causal = at::ones({1, 1, 32, 32}, at::kBool).tril();
    return testing::make_module("Attention", "def forward(self, " + c.args + "):\n" + c.body,
                                {{"causal", causal},
                                 {"masked_bias", at::full({}, -1e4)},
                                 {"position_bias", at::randn({1, kH, kL, kL})}});
}

at::Tensor qkv() { return at::randn({kB, kH, kL, kD}); }
at::Tensor padding_bias() {
    at::Tensor m = at::zeros({kB, 1, 1, kL});
    m.slice(3, kL - 3).fill_(-1e4);
    return m;
}

class FuseAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(FuseAttention, CountsAndOutputs) {
    const AttentionCase &c = GetParam();
    auto frozen = testing::freeze(attention_module(c));
    if (c.ranks)
        for (size_t i = 0; i < c.inputs.size(); ++i)
            frozen.graph->inputs()[i + 1]->setType(c10::TensorType::create(c.inputs[i]));
    std::vector<c10::IValue> inputs(c.inputs.begin(), c.inputs.end());
    const GraphPtr original = frozen.graph->copy();
    const int softmax_before = testing::count(original, "aten::softmax") + testing::count(original, "aten::_softmax");
    const PassResult r = fuse_attention(frozen.graph);
    torch::jit::EliminateDeadCode(frozen.graph);
    EXPECT_EQ(r.count, c.fused) << *original;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::attention"), c.fused) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::softmax"), softmax_before - c.fused) << *frozen.graph;
    if (c.fused == 0) EXPECT_FALSE(r.skipped.empty());
    const auto want = testing::run_graph(original, frozen.module, inputs);
    const auto got = testing::run_graph(frozen.graph, frozen.module, inputs);
    EXPECT_LE(testing::max_relative_error(got, want), 1e-5) << *frozen.graph;
}

std::vector<AttentionCase> cases() {
    at::manual_seed(6);
    const at::Tensor bool_pad = at::rand({kB, 1, 1, kL}) > 0.7;
    bool_pad.select(3, 0).fill_(false);
    const at::Tensor bqhd = at::randn({kB, kL, kH, kD});
    return {
        {"einsum", "q, k, v",
         "    s = torch.einsum('bqhd,bkhd->bhqk', q, k) * 0.25\n"
         "    return torch.einsum('bhqk,bkhd->bqhd', torch.softmax(s, dim=-1), v)\n",
         {bqhd, at::randn({kB, kL, kH, kD}), at::randn({kB, kL, kH, kD})}, 1},
        {"einsum_heads_first", "q, k, v",
         "    s = torch.einsum('bhid,bhjd->bhij', q, k) / 4.0\n"
         "    return torch.einsum('bhij,bhjd->bhid', torch.softmax(s, dim=-1), v)\n",
         {qkv(), qkv(), qkv()}, 1},
        {"bert", "q, k, v, mask",
         "    s = torch.matmul(q, k.transpose(-1, -2))\n"
         "    s = s / 4.0\n"
         "    s = s + mask\n"
         "    return torch.matmul(torch.softmax(s, dim=-1), v)\n",
         {qkv(), qkv(), qkv(), padding_bias()}, 1},
        {"gpt2", "q, k, v, mask",
         "    s = torch.matmul(q, k.transpose(-1, -2)) / 4.0\n"
         "    n = q.size(-2)\n"
         "    m = k.size(-2)\n"
         "    c = self.causal[:, :, m - n:m, :m]\n"
         "    s = torch.where(c, s, self.masked_bias.to(s.dtype))\n"
         "    s = s + mask\n"
         "    p = torch.softmax(s, dim=-1)\n"
         "    p = p.type(v.dtype)\n"
         "    return torch.matmul(p, v)\n",
         {qkv(), qkv(), qkv(), padding_bias()}, 1},
        {"gpt2_scalar_fill", "q, k, v",
         "    s = torch.matmul(q, k.transpose(-1, -2))\n"
         "    c = self.causal[:, :, 0:13, 0:13]\n"
         "    s = torch.where(c, s, -10000.0) * 0.25\n"
         "    return torch.matmul(torch.softmax(s, -1), v)\n",
         {qkv(), qkv(), qkv()}, 1},
        {"t5_position_bias", "q, k, v",
         "    s = torch.matmul(q, k.transpose(3, 2))\n"
         "    s = s + self.position_bias\n"
         "    p = torch.softmax(s.float(), dim=-1).type_as(s)\n"
         "    return torch.matmul(p, v)\n",
         {qkv(), qkv(), qkv()}, 1, true},
        {"masked_fill", "q, k, v, pad",
         "    s = torch.matmul(q, k.transpose(-2, -1)) * 0.125\n"
         "    s = s.masked_fill(pad, -1e9)\n"
         "    return torch.softmax(s, -1) @ v\n",
         {qkv(), qkv(), qkv(), bool_pad}, 1},
        {"bmm_rank3", "q, k, v",
         "    s = torch.bmm(q, k.transpose(1, 2)) * 0.5\n"
         "    return torch.bmm(torch.softmax(s, dim=2), v)\n",
         {at::randn({6, kL, kD}), at::randn({6, 9, kD}), at::randn({6, 9, 5})}, 1, true},
        {"permuted_key", "q, k, v",
         "    s = torch.matmul(q, k.permute(0, 1, 3, 2)) / 8.0\n"
         "    return torch.matmul(torch.softmax(s, dim=-1), v)\n",
         {qkv(), qkv(), qkv()}, 1},
        {"key_given_transposed", "q, kt, v",
         "    return torch.matmul(torch.softmax(torch.matmul(q, kt) * 0.25, dim=-1), v)\n",
         {qkv(), at::randn({kB, kH, kD, kL}), qkv()}, 1},
        {"scripted_in_place_bias", "q, k, v",
         "    s = torch.matmul(q, k.transpose(-1, -2))\n"
         "    s += self.position_bias\n"
         "    return torch.matmul(torch.softmax(s, dim=-1), v)\n",
         {qkv(), qkv(), qkv()}, 1},
        {"two_layers", "q, k, v",
         "    a = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1), v)\n"
         "    return torch.matmul(torch.softmax(torch.matmul(a, k.transpose(-1, -2)) * 0.5, dim=-1), v)\n",
         {qkv(), qkv(), qkv()}, 2},
        // nn.MultiheadAttention outside its fast path (nn.TransformerDecoderLayer): the mask
        // added by baddbmm, -inf above the diagonal.
        {"mha_baddbmm_causal", "q, k, v",
         "    mask = torch.triu(torch.full([13, 13], float('-inf')), diagonal=1)\n"
         "    s = torch.baddbmm(mask.unsqueeze(0), q * 0.25, k.transpose(-2, -1))\n"
         "    return torch.bmm(torch.softmax(s, dim=-1), v)\n",
         {at::randn({6, kL, kD}), at::randn({6, kL, kD}), at::randn({6, kL, 5})}, 1, true},
        // Left alone:
        {"baddbmm_scaled", "q, k, v, b",
         "    s = torch.baddbmm(b, q, k.transpose(-2, -1), beta=1.0, alpha=0.5)\n"
         "    return torch.bmm(torch.softmax(s, dim=-1), v)\n",
         {at::randn({6, kL, kD}), at::randn({6, kL, kD}), at::randn({6, kL, 5}), at::randn({6, kL, kL})}, 0, true},
        {"weights_returned", "q, k, v",
         "    p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1)\n"
         "    return torch.matmul(p, v), p\n",
         {qkv(), qkv(), qkv()}, 0},
        {"softmax_over_queries", "q, k, v",
         "    return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=2), v)\n",
         {qkv(), qkv(), qkv()}, 0},
        {"scaled_after_bias", "q, k, v, mask",
         "    s = (torch.matmul(q, k.transpose(-1, -2)) + mask) * 0.5\n"
         "    return torch.matmul(torch.softmax(s, dim=-1), v)\n",
         {qkv(), qkv(), qkv(), padding_bias()}, 0},
        {"scale_not_constant", "q, k, v, t",
         "    s = torch.matmul(q, k.transpose(-1, -2)) * t\n"
         "    return torch.matmul(torch.softmax(s, dim=-1), v)\n",
         {qkv(), qkv(), qkv(), at::rand({})}, 0},
        {"scripted_in_place_bias_then_used", "q, k, v",
         "    s = torch.matmul(q, k.transpose(-1, -2))\n"
         "    s += self.position_bias\n"
         "    return torch.matmul(torch.softmax(s, dim=-1), v), s.sum()\n",
         {qkv(), qkv(), qkv()}, 0},
    };
}

INSTANTIATE_TEST_SUITE_P(Patterns, FuseAttention, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

TEST(FuseAttentionTraced, InPlaceBiasHandedOn) {
    // A traced `s += bias` feeds the add_'s output to the softmax: taken.
    auto frozen = testing::freeze(testing::make_module("Attention", "def forward(self, q, k, v):\n    return q\n"));
    auto &graph = *frozen.graph;
    graph.block()->return_node()->removeAllInputs();
    torch::jit::Value *q = graph.inputs()[1], *k = graph.inputs()[2], *v = graph.inputs()[3];
    torch::jit::WithInsertPoint guard(graph.block()->return_node());
    auto op = [&](const char *kind, std::vector<torch::jit::Value *> args) {
        torch::jit::Node *n = graph.insertNode(graph.create(c10::Symbol::fromQualString(kind), args, 1));
        n->output()->setType(c10::TensorType::get());
        return n->output();
    };
    torch::jit::Value *kt = op("aten::transpose", {k, graph.insertConstant(-1), graph.insertConstant(-2)});
    torch::jit::Value *s = op("aten::matmul", {q, kt});
    torch::jit::Value *bias = graph.insertConstant(at::randn({1, kH, kL, kL}));
    s = op("aten::add_", {s, bias, graph.insertConstant(1)});
    torch::jit::Value *p = op("aten::softmax", {s, graph.insertConstant(-1), graph.insertConstant(c10::IValue())});
    graph.registerOutput(op("aten::matmul", {p, v}));
    const GraphPtr original = frozen.graph->copy();
    const PassResult r = fuse_attention(frozen.graph);
    torch::jit::EliminateDeadCode(frozen.graph);
    EXPECT_EQ(r.count, 1) << *frozen.graph;
    std::vector<c10::IValue> inputs{qkv(), qkv(), qkv()};
    EXPECT_LE(testing::max_relative_error(testing::run_graph(frozen.graph, frozen.module, inputs),
                                          testing::run_graph(original, frozen.module, inputs)),
              1e-5);
}

}  // namespace
}  // namespace ipex::passes
