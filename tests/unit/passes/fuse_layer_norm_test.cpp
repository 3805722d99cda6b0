// fuse_layer_norm on frozen scripted modules: post-norm (add then layer norm), pre-norm (the
// sum used again), alpha, no affine parameters, broadcast and scalar adds, a layer norm alone;
// op counts before and after and outputs against the unmodified graph in fp32 and in bf16;
// and cast_to_lowp after it: a bf16 model's layer norm takes and gives bf16 with no cast.
#include <gtest/gtest.h>

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/cast_to_lowp.h"
#include "passes/fuse_layer_norm.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

constexpr int64_t kB = 2, kL = 7, kD = 40;

struct NormCase {
    std::string name;
    std::string body;  // forward(self, x, h)
    int fused;         // ipex::layer_norm + ipex::add_layer_norm after
    int with_sum;      // of which ipex::add_layer_norm
    int adds_after;    // aten::add left
    bool fp32_operand = false;  // adds an fp32 parameter: the result is fp32 for bf16 inputs too
};

torch::jit::Module norm_module(const NormCase &c) {
    return testing::make_module("Norm", "def forward(self, x, h):\n" + c.body,
                                {{"w", at::randn({kD})}, {"b", at::randn({kD})}, {"bias", at::randn({kD})}});
}

class FuseLayerNorm : public ::testing::TestWithParam<NormCase> {};

TEST_P(FuseLayerNorm, CountsAndOutputs) {
    const NormCase &c = GetParam();
    auto frozen = testing::freeze(norm_module(c));
    const GraphPtr original = frozen.graph->copy();
    const int norms = testing::count(original, "aten::layer_norm");
    const PassResult r = fuse_layer_norm(frozen.graph);
    torch::jit::EliminateDeadCode(frozen.graph);
    EXPECT_EQ(r.count, norms);
    EXPECT_EQ(testing::count(frozen.graph, "aten::layer_norm"), 0) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::layer_norm") + testing::count(frozen.graph, "ipex::add_layer_norm"),
              c.fused)
        << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::add_layer_norm"), c.with_sum) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::add"), c.adds_after) << *frozen.graph;
    EXPECT_EQ(r.details["with_sum_output"].get<int>(), c.with_sum);
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor x = at::randn({kB, kL, kD}).to(dtype), h = at::randn({kB, kL, kD}).to(dtype);
        // aten's layer_norm wants weights of the input's dtype: the original runs on the same
        // values widened to fp32; bf16 results differ by the sum's and the output's rounding.
        const auto want = testing::run_graph(original, frozen.module, {x.to(at::kFloat), h.to(at::kFloat)});
        const auto got = testing::run_graph(frozen.graph, frozen.module, {x, h});
        for (const auto &t : testing::flatten_tensors(got))
            EXPECT_EQ(t.scalar_type(), c.fp32_operand ? at::kFloat : dtype) << c.name;
        EXPECT_LE(testing::max_relative_error(got, want), dtype == at::kFloat ? 1e-5 : 2e-2)
            << c.name << " " << dtype << "\n" << *frozen.graph;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Forms, FuseLayerNorm,
    ::testing::Values(
        NormCase{"post_norm", "    return torch.layer_norm(x + h, [40], self.w, self.b, 1e-5)\n", 1, 0, 0},
        NormCase{"pre_norm",
                 "    s = x + h\n"
                 "    y = torch.layer_norm(s, [40], self.w, self.b, 1e-5)\n"
                 "    return s + y\n",
                 1, 1, 1},
        NormCase{"sum_returned",
                 "    s = torch.add(h, x, alpha=2)\n"
                 "    return s, torch.layer_norm(s, [40], self.w, self.b, 1e-6)\n",
                 1, 1, 0},
        NormCase{"alpha", "    return torch.layer_norm(torch.add(x, h, alpha=-0.5), [40], self.w, self.b, 1e-5)\n", 1,
                 0, 0},
        NormCase{"no_affine", "    return torch.layer_norm(x + h, [40])\n", 1, 0, 0},
        NormCase{"two_dims", "    return torch.layer_norm(x + h, [7, 40])\n", 1, 0, 0},
        NormCase{"broadcast_add", "    return torch.layer_norm(x + self.bias, [40], self.w, self.b, 1e-5)\n", 1, 0,
                 0, true},
        NormCase{"scalar_add", "    return torch.layer_norm(x + 1.5, [40], self.w, self.b, 1e-5)\n", 1, 0, 1},
        NormCase{"alone", "    return torch.layer_norm(x, [40], self.w, self.b, 1e-5) + h\n", 1, 0, 1},
        NormCase{"chain",
                 "    a = torch.layer_norm(x + h, [40], self.w, self.b, 1e-5)\n"
                 "    return torch.layer_norm(a + h, [40], self.w, None, 1e-5)\n",
                 2, 0, 0}),
    [](const auto &info) { return info.param.name; });

// After cast_to_lowp, a bf16 model's post-norm residual runs on bf16 values: no cast to fp32
// before the layer norm and none after it.
TEST(FuseLayerNormLowp, Bf16LayerNormHasNoCasts) {
    auto frozen = testing::freeze(testing::make_module("Block",
                                                       "def forward(self, x):\n"
                                                       "    h = torch.matmul(x, self.w1)\n"
                                                       "    y = torch.layer_norm(h + torch.matmul(h, self.w2), [40])\n"
                                                       "    return torch.matmul(y, self.w2)\n",
                                                       {{"w1", at::randn({kD, kD})}, {"w2", at::randn({kD, kD})}}));
    const GraphPtr original = frozen.graph->copy();
    fuse_layer_norm(frozen.graph);
    cast_to_lowp(frozen.graph, at::kBFloat16, {});
    torch::jit::EliminateDeadCode(frozen.graph);
    ASSERT_EQ(testing::count(frozen.graph, "ipex::layer_norm"), 1) << *frozen.graph;
    for (torch::jit::Node *node : frozen.graph->nodes())
        if (node->kind() == c10::Symbol::fromQualString("ipex::layer_norm"))
            for (size_t i = 0; i < 2; ++i)
                EXPECT_EQ(node->input(i)->node()->kind(), c10::Symbol::fromQualString("aten::matmul"))
                    << "layer norm operand " << i << " is not the matmul's bf16 output\n" << *frozen.graph;
    const std::vector<c10::IValue> inputs = {at::randn({kB, kL, kD})};
    const auto want = testing::run_graph(original, frozen.module, inputs);
    const auto got = testing::run_graph(frozen.graph, frozen.module, inputs);
    EXPECT_GE(testing::cosine_similarity(got, want), 0.999);
}

}  // namespace
}  // namespace ipex::passes
