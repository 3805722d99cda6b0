// fuse_norm_relu on frozen scripted modules: inference batch norms, with the cat along dim 1
// feeding them and the ReLU after them where nothing else uses those, become
// ipex::norm_relu; op counts before and after, the report's details, and outputs against the
// unmodified graph for fp32 and bf16, NCHW and channels-last inputs.
#include <gtest/gtest.h>

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/fuse_norm_relu.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

struct NormCase {
    std::string name;
    std::string body;  // forward(self, a, b); self.bn: 12 channels, self.bn6: 6, no weight or bias
    int fused;         // ipex::norm_relu after
    int with_cat, with_relu;
    int norms_left;    // aten::batch_norm after
    int cats_left;     // aten::cat after
};

class FuseNormRelu : public ::testing::TestWithParam<NormCase> {};

TEST_P(FuseNormRelu, CountsAndOutputs) {
    const NormCase &c = GetParam();
    auto module = testing::make_module("Net", "def forward(self, a, b):\n" + c.body, {},
                                       {{"bn", testing::batch_norm_module(12)},
                                        {"bn6", testing::batch_norm_module(6, false)}});
    auto frozen = testing::freeze(module);
    const GraphPtr original = frozen.graph->copy();
    const PassResult r = fuse_norm_relu(frozen.graph);
    torch::jit::EliminateDeadCode(frozen.graph);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::norm_relu"), c.fused) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::batch_norm"), c.norms_left) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::cat"), c.cats_left) << *frozen.graph;
    EXPECT_EQ(r.count, c.fused);
    EXPECT_EQ(r.changed, c.fused > 0);
    EXPECT_EQ(r.details["norm_relu"].get<int>(), c.fused);
    EXPECT_EQ(r.details["with_cat"].get<int>(), c.with_cat);
    EXPECT_EQ(r.details["with_relu"].get<int>(), c.with_relu);
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const bool channels_last : {false, true}) {
            at::Tensor a = at::randn({2, 6, 9, 7}).to(dtype), b = at::randn({2, 6, 9, 7}).to(dtype);
            if (channels_last) {
                a = a.contiguous(at::MemoryFormat::ChannelsLast);
                b = b.contiguous(at::MemoryFormat::ChannelsLast);
            }
            const auto want = testing::run_graph(original, frozen.module, {a, b});
            const auto got = testing::run_graph(frozen.graph, frozen.module, {a, b});
            const auto got_t = testing::flatten_tensors(got), want_t = testing::flatten_tensors(want);
            ASSERT_EQ(got_t.size(), want_t.size());
            for (size_t i = 0; i < got_t.size(); ++i) {
                EXPECT_EQ(got_t[i].sizes(), want_t[i].sizes()) << c.name;
                EXPECT_EQ(got_t[i].scalar_type(), want_t[i].scalar_type()) << c.name;
            }
            // The folded scale and shift round differently from aten's; bf16 outputs may
            // then land one bf16 step apart.
            EXPECT_LE(testing::max_relative_error(got, want), dtype == at::kFloat ? 1e-5 : 1e-2)
                << c.name << " " << dtype << (channels_last ? " channels-last" : "") << "\n" << *frozen.graph;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Forms, FuseNormRelu,
    ::testing::Values(
        // DenseNet's layer: cat, norm, in-place relu
        NormCase{"cat_norm_relu_", "    x = torch.cat([a, b], 1)\n    return torch.relu_(self.bn.forward(x))\n", 1, 1, 1, 0, 0},
        NormCase{"cat_norm_relu", "    return torch.relu(self.bn.forward(torch.cat([a, b], 1)))\n", 1, 1, 1, 0, 0},
        NormCase{"norm_relu", "    return torch.relu(self.bn6.forward(a)) + b\n", 1, 0, 1, 0, 0},
        NormCase{"norm_alone", "    return self.bn6.forward(a) * b\n", 1, 0, 0, 0, 0},
        // the norm's result is used twice: the ReLU stays
        NormCase{"norm_used_twice", "    y = self.bn6.forward(a)\n    return torch.relu(y) + y\n", 1, 0, 0, 0, 0},
        // the cat's result is returned too: the cat stays, its result is the norm's input
        NormCase{"cat_used_twice", "    x = torch.cat([a, b], 1)\n    return torch.relu(self.bn.forward(x)), x\n", 1, 0, 1, 0,
                 1},
        // along another dim: the cat stays
        NormCase{"cat_other_dim", "    x = torch.cat([a, b], 2)\n    return torch.relu(self.bn6.forward(x))\n", 1, 0, 1, 0, 1},
        // the list is read again: the cat stays
        NormCase{"list_used_twice", "    l = [a, b]\n    x = torch.cat(l, 1)\n    return torch.relu(self.bn.forward(x)), torch.stack(l, 0)\n",
                 1, 0, 1, 0, 1},
        // statistics updated while training: left alone
        NormCase{"training",
                 "    return torch.relu(torch.batch_norm(a, None, None, None, None, True, 0.1, 1e-5, False))\n", 0, 0, 0,
                 1, 0}),
    [](const ::testing::TestParamInfo<NormCase> &info) { return info.param.name; });

TEST(FuseNormReluReport, SkipsNormsItCannotFold) {
    auto frozen = testing::freeze(testing::make_module(
        "Net", "def forward(self, a, b):\n    return torch.batch_norm(a, None, None, None, None, True, 0.1, 1e-5, False)\n"));
    const PassResult r = fuse_norm_relu(frozen.graph);
    EXPECT_EQ(r.count, 0);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped[0].find("training"), std::string::npos) << r.skipped[0];
}

}  // namespace
}  // namespace ipex::passes
