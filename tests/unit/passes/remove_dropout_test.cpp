#include <gtest/gtest.h>

#include "pass_test_utils.h"
#include "ir/graph_utils.h"
#include "passes/remove_dropout.h"

namespace ipex::passes {
namespace {

int dropouts(const std::shared_ptr<torch::jit::Graph> &graph) {
    int n = 0;
    for (const auto &[kind, count] : op_histogram(*graph))
        if (kind.find("dropout") != std::string::npos) n += count;
    return n;
}

class RemoveDropout : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

// Every variant as nn.Dropout/Dropout1d/2d/3d/AlphaDropout/FeatureAlphaDropout script
// them in torch 1.13 (feature_dropout is what Dropout1d/2d/3d call), in-place forms included.
TEST_F(RemoveDropout, RemovesEveryVariantInEval) {
    auto model = testing::make_module(
        "AllDropouts",
        "def forward(self, x):\n"
        "    y = torch.dropout(x, 0.5, self.training)\n"
        "    y = torch.feature_dropout(y, 0.5, self.training)\n"
        "    y = torch.alpha_dropout(y, 0.5, self.training)\n"
        "    y = torch.feature_alpha_dropout(y, 0.5, self.training)\n"
        "    y = y * 2.0\n"
        "    y = torch.dropout_(y, 0.5, self.training)\n"
        "    y = torch.feature_dropout_(y, 0.5, self.training)\n"
        "    y = torch.alpha_dropout_(y, 0.5, self.training)\n"
        "    y = torch.feature_alpha_dropout_(y, 0.5, self.training)\n"
        "    return y + 1.0\n");
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    ASSERT_EQ(dropouts(frozen.graph), 8);
    const PassResult r = remove_dropout(frozen.graph);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.count, 8);
    EXPECT_TRUE(r.skipped.empty());
    EXPECT_EQ(dropouts(frozen.graph), 0);
    const at::Tensor x = at::randn({2, 3, 4, 5});
    EXPECT_LE(testing::max_relative_error(testing::run_graph(frozen.graph, frozen.module, {x}),
                                          testing::run_graph(original, frozen.module, {x})),
              testing::kFp32Tolerance);
}

TEST_F(RemoveDropout, RemovesInsideControlFlowAndReportsModule) {
    auto drop = testing::make_module("Drop",
                                     "def forward(self, x):\n    return torch.dropout(x, 0.1, self.training)\n");
    auto model = testing::make_module("Net",
                                      "def forward(self, x, n: int):\n"
                                      "    for i in range(n):\n"
                                      "        if i % 2 == 0:\n"
                                      "            x = self.drop.forward(x) + 1.0\n"
                                      "    return x\n",
                                      {}, {{"drop", drop}});
    auto frozen = testing::freeze(model);
    const PassResult r = remove_dropout(frozen.graph);
    EXPECT_EQ(r.count, 1);
    EXPECT_EQ(r.modules, std::vector<std::string>{"drop"});
    EXPECT_EQ(dropouts(frozen.graph), 0);
}

TEST_F(RemoveDropout, RemovesDropoutReturnedDirectly) {
    auto frozen = testing::freeze(
        testing::make_module("Ret", "def forward(self, x):\n    return torch.dropout(x, 0.5, self.training)\n"));
    EXPECT_EQ(remove_dropout(frozen.graph).count, 1);
    const at::Tensor x = at::randn({4});
    EXPECT_TRUE(testing::run_graph(frozen.graph, frozen.module, {x}).toTensor().equal(x));
}

TEST_F(RemoveDropout, KeepsExplicitTrainingTrue) {
    auto frozen = testing::freeze(testing::make_module(
        "MonteCarlo", "def forward(self, x):\n    return torch.dropout(x, 0.5, True) + torch.dropout(x, 0.5, self.training)\n"));
    const PassResult r = remove_dropout(frozen.graph);
    EXPECT_EQ(r.count, 1);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped.front().find("training=True"), std::string::npos) << r.skipped.front();
    EXPECT_EQ(dropouts(frozen.graph), 1);
}

TEST_F(RemoveDropout, KeepsNonConstantTrainFlag) {
    auto frozen = testing::freeze(testing::make_module(
        "Flag", "def forward(self, x, train: bool):\n    return torch.feature_alpha_dropout(x, 0.5, train)\n"));
    const std::string before = frozen.graph->toString();
    const PassResult r = remove_dropout(frozen.graph);
    EXPECT_FALSE(r.changed);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped.front().find("not a constant"), std::string::npos);
    EXPECT_EQ(frozen.graph->toString(), before);
}

TEST_F(RemoveDropout, NoOpWithoutDropout) {
    auto frozen = testing::freeze(testing::make_module("Plain", "def forward(self, x):\n    return x * 2.0\n"));
    const PassResult r = remove_dropout(frozen.graph);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(r.count, 0);
}

}  // namespace
}  // namespace ipex::passes
