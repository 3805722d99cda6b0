#include <gtest/gtest.h>

#include "pass_test_utils.h"
#include "passes/fold_linear_bn.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

constexpr int64_t kIn = 5;
constexpr int64_t kOut = 6;

torch::jit::Module linear_bn(bool bias = true, int64_t bn_channels = kOut) {
    return testing::make_module("LinearBn", "def forward(self, x):\n    return self.bn.forward(self.fc.forward(x))\n",
                                {},
                                {{"fc", testing::linear_module(kIn, kOut, bias)},
                                 {"bn", testing::batch_norm_module(bn_channels)}});
}

void set_input_rank(const std::shared_ptr<torch::jit::Graph> &graph, const at::Tensor &example) {
    graph->inputs()[1]->setType(c10::TensorType::create(example));
}

void expect_same(const testing::Frozen &frozen, const std::shared_ptr<torch::jit::Graph> &original,
                 const at::Tensor &x) {
    const auto want = testing::run_graph(original, frozen.module, {x});
    const auto got = testing::run_graph(frozen.graph, frozen.module, {x});
    EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance) << "input rank " << x.dim();
}

class FoldLinearBn : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(FoldLinearBn, FoldsDirectlyWhenInputIsKnown2d) {
    for (bool bias : {true, false}) {
        auto frozen = testing::freeze(linear_bn(bias));
        const at::Tensor x = at::randn({4, kIn});
        set_input_rank(frozen.graph, x);
        auto original = frozen.graph->copy();
        const PassResult r = fold_linear_bn(frozen.graph);
        EXPECT_EQ(r.count, 1);
        EXPECT_EQ(r.modules, (std::vector<std::string>{"fc", "bn"}));
        EXPECT_EQ(testing::count(frozen.graph, "aten::batch_norm"), 0);
        EXPECT_EQ(testing::count(frozen.graph, "prim::If"), 0);
        EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 1);
        expect_same(frozen, original, x);
    }
}

// Scripted graphs carry no rank: the fold is guarded and both ranks stay correct.
TEST_F(FoldLinearBn, GuardsWhenRankUnknown) {
    auto frozen = testing::freeze(linear_bn());
    auto original = frozen.graph->copy();
    const PassResult r = fold_linear_bn(frozen.graph);
    EXPECT_EQ(r.count, 1);
    EXPECT_EQ(testing::count(frozen.graph, "prim::If"), 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::batch_norm"), 1);  // only in the fallback branch
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 2);
    // In the taken branch for 2-D input nothing but the folded linear runs.
    expect_same(frozen, original, at::randn({4, kIn}));
    // 3-D input [N, L, in]: BatchNorm1d then normalizes dim 1 (L == kOut here).
    expect_same(frozen, original, at::randn({3, kOut, kIn}));
}

// Scripted nn.BatchNorm1d checks input.dim() first; the check reads the replacement.
TEST_F(FoldLinearBn, GuardedFoldKeepsScriptedRankCheck) {
    auto bn = testing::make_module(
        "CheckedBn",
        "def forward(self, x):\n"
        "    assert x.dim() == 2 or x.dim() == 3\n"
        "    return self.bn.forward(x)\n",
        {}, {{"bn", testing::batch_norm_module(kOut)}});
    auto model = testing::make_module("M", "def forward(self, x):\n    return self.bn.forward(self.fc.forward(x))\n",
                                      {}, {{"fc", testing::linear_module(kIn, kOut)}, {"bn", bn}});
    for (bool known_2d : {false, true}) {
        auto frozen = testing::freeze(model);
        if (known_2d) set_input_rank(frozen.graph, at::randn({4, kIn}));
        auto original = frozen.graph->copy();
        const PassResult r = fold_linear_bn(frozen.graph);
        EXPECT_EQ(r.count, 1);
        expect_same(frozen, original, at::randn({4, kIn}));
        if (!known_2d) expect_same(frozen, original, at::randn({3, kOut, kIn}));
    }
}

TEST_F(FoldLinearBn, SkipsKnown3dInput) {
    auto frozen = testing::freeze(linear_bn());
    set_input_rank(frozen.graph, at::randn({3, kOut, kIn}));
    const std::string before = frozen.graph->toString();
    const PassResult r = fold_linear_bn(frozen.graph);
    EXPECT_FALSE(r.changed);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped.front().find("3-D"), std::string::npos) << r.skipped.front();
    EXPECT_EQ(frozen.graph->toString(), before);
}

TEST_F(FoldLinearBn, SkipsSecondUserReturnedOutputAndMismatch) {
    struct Case {
        torch::jit::Module model;
        std::string reason;
    };
    std::vector<Case> cases;
    cases.push_back({testing::make_module("TwoUsers",
                                          "def forward(self, x):\n    y = self.fc.forward(x)\n    return self.bn.forward(y) * y\n",
                                          {}, {{"fc", testing::linear_module(kIn, kOut)}, {"bn", testing::batch_norm_module(kOut)}}),
                     "other users"});
    cases.push_back({testing::make_module("Returned",
                                          "def forward(self, x):\n    y = self.fc.forward(x)\n    return (self.bn.forward(y), y)\n",
                                          {}, {{"fc", testing::linear_module(kIn, kOut)}, {"bn", testing::batch_norm_module(kOut)}}),
                     "returned"});
    cases.push_back({linear_bn(true, kOut + 1), "output features"});
    cases.push_back({testing::make_module("WeightInput",
                                          "def forward(self, x, w):\n    return self.bn.forward(torch.linear(x, w, None))\n",
                                          {}, {{"bn", testing::batch_norm_module(kOut)}}),
                     "not a constant"});
    for (auto &c : cases) {
        auto frozen = testing::freeze(c.model);
        const std::string before = frozen.graph->toString();
        const PassResult r = fold_linear_bn(frozen.graph);
        EXPECT_FALSE(r.changed);
        ASSERT_EQ(r.skipped.size(), 1u);
        EXPECT_NE(r.skipped.front().find(c.reason), std::string::npos) << r.skipped.front();
        EXPECT_EQ(frozen.graph->toString(), before);
    }
}

TEST_F(FoldLinearBn, FoldsInsideLoop) {
    auto model = testing::make_module("Loop",
                                      "def forward(self, x, n: int):\n"
                                      "    y = x\n"
                                      "    for i in range(n):\n"
                                      "        y = self.bn.forward(self.fc.forward(x)) + y.sum()\n"
                                      "    return y\n",
                                      {}, {{"fc", testing::linear_module(kIn, kOut)}, {"bn", testing::batch_norm_module(kOut)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    EXPECT_EQ(fold_linear_bn(frozen.graph).count, 1);
    const at::Tensor x = at::randn({4, kIn});
    EXPECT_LE(testing::max_relative_error(testing::run_graph(frozen.graph, frozen.module, {x, 2}),
                                          testing::run_graph(original, frozen.module, {x, 2})),
              testing::kFp32Tolerance);
}

}  // namespace
}  // namespace ipex::passes
