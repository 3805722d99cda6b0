#include <gtest/gtest.h>

#include "pass_test_utils.h"
#include "passes/concat_linear.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

constexpr int64_t kHidden = 8;

testing::Children qkv(bool k_bias = true) {
    return {{"q", testing::linear_module(kHidden, kHidden)},
            {"k", testing::linear_module(kHidden, kHidden, k_bias)},
            {"v", testing::linear_module(kHidden, 2 * kHidden)}};
}

void expect_same(const testing::Frozen &frozen, const std::shared_ptr<torch::jit::Graph> &original,
                 std::vector<c10::IValue> inputs) {
    const auto want = testing::run_graph(original, frozen.module, inputs);
    const auto got = testing::run_graph(frozen.graph, frozen.module, inputs);
    EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance);
}

struct Merged {
    testing::Frozen frozen;
    std::shared_ptr<torch::jit::Graph> original;
};

// Freezes a module with `forward_body` over the q/k/v linears and runs the pass; expects
// `merged` linears merged and `contiguous` slices made contiguous.
Merged merge_qkv(const std::string &forward_body, int merged, int contiguous) {
    auto frozen = testing::freeze(testing::make_module("Qkv", "def forward(self, x):\n" + forward_body, {}, qkv()));
    auto original = frozen.graph->copy();
    EXPECT_EQ(concat_linear(frozen.graph).count, merged) << forward_body;
    EXPECT_EQ(testing::count(frozen.graph, "aten::contiguous"), contiguous) << forward_body;
    return {frozen, original};
}

class ConcatLinear : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(ConcatLinear, MergesLinearsSharingAnInput) {
    auto model = testing::make_module("Attn",
                                      "def forward(self, x):\n"
                                      "    q = self.q.forward(x)\n"
                                      "    k = self.k.forward(x)\n"
                                      "    v = self.v.forward(x)\n"
                                      "    return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)), -1), v)\n",
                                      {}, qkv());
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    const PassResult r = concat_linear(frozen.graph);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.count, 3);
    EXPECT_EQ(r.modules, (std::vector<std::string>{"q", "k", "v"}));
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::split_with_sizes"), 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::contiguous"), 0);  // transpose + matmul copy nothing
    expect_same(frozen, original, {at::randn({2, 5, kHidden})});
}

// A slice of the merged output is not viewable like a fresh tensor: outputs that reach
// view() (even through transpose) or the graph output are made contiguous.
TEST_F(ConcatLinear, ViewedAndReturnedOutputsStayContiguous) {
    const auto [frozen, original] = merge_qkv("    q = self.q.forward(x)\n"
                                              "    k = self.k.forward(x)\n"
                                              "    v = self.v.forward(x)\n"
                                              "    return q.view(-1), k.t().t().view(-1), v\n",
                                              3, 3);
    const at::Tensor x = at::randn({3, kHidden});
    expect_same(frozen, original, {x});
    const auto out = testing::run_graph(frozen.graph, frozen.module, {x}).toTupleRef().elements();
    EXPECT_TRUE(out[2].toTensor().is_contiguous());
}

// Code that reads strides sees those of a fresh tensor, not of a slice.
TEST_F(ConcatLinear, StrideReadersSeeAFreshLayout) {
    const auto [frozen, original] = merge_qkv("    q = self.q.forward(x)\n"
                                              "    k = self.k.forward(x)\n"
                                              "    return q.stride(0), k.is_contiguous(), k + 1.0\n",
                                              2, 2);
    const at::Tensor x = at::randn({3, kHidden});
    const auto want = testing::run_graph(original, frozen.module, {x}).toTupleRef().elements();
    const auto got = testing::run_graph(frozen.graph, frozen.module, {x}).toTupleRef().elements();
    EXPECT_EQ(got[0].toInt(), want[0].toInt());
    EXPECT_EQ(got[0].toInt(), kHidden);
    EXPECT_TRUE(got[1].toBool());
    EXPECT_TRUE(got[2].toTensor().allclose(want[2].toTensor()));
}

TEST_F(ConcatLinear, PlainConsumersReadSlicesWithoutCopies) {
    auto model = testing::make_module("Mlp",
                                      "def forward(self, x):\n"
                                      "    return torch.relu(self.q.forward(x)) + self.k.forward(x)\n",
                                      {}, qkv());
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    EXPECT_EQ(concat_linear(frozen.graph).count, 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::contiguous"), 0);
    expect_same(frozen, original, {at::randn({4, kHidden})});
    expect_same(frozen, original, {at::randn({kHidden})});
}

TEST_F(ConcatLinear, MergesLinearsWithAndWithoutBias) {
    auto model = testing::make_module("Mixed",
                                      "def forward(self, x):\n"
                                      "    return self.q.forward(x) + self.k.forward(x), self.v.forward(x)\n",
                                      {}, qkv(/*k_bias=*/false));
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    const PassResult r = concat_linear(frozen.graph);
    EXPECT_EQ(r.count, 3);  // k has no bias: it joins with a zero bias
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 1);
    EXPECT_TRUE(r.skipped.empty());
    expect_same(frozen, original, {at::randn({4, kHidden})});
}

TEST_F(ConcatLinear, MustNotMerge) {
    struct Case {
        const char *name;
        std::string source;
        std::string reason;
    };
    const std::vector<Case> cases = {
        {"DifferentInputs", "def forward(self, x, y):\n    return self.q.forward(x) + self.k.forward(y)\n", ""},
        {"MutatedInput",
         "def forward(self, x, y):\n    a = self.q.forward(x)\n    x.add_(1.0)\n    return a + self.k.forward(x)\n",
         "modified in place"},
        {"WeightInput",
         "def forward(self, x, w):\n    return self.q.forward(x) + torch.linear(x, w, None)\n", "not a constant"},
    };
    for (const auto &c : cases) {
        auto frozen = testing::freeze(testing::make_module(c.name, c.source, {}, qkv()));
        const std::string before = frozen.graph->toString();
        const PassResult r = concat_linear(frozen.graph);
        EXPECT_FALSE(r.changed) << c.name;
        EXPECT_EQ(frozen.graph->toString(), before) << c.name;
        if (c.reason.empty()) {
            EXPECT_TRUE(r.skipped.empty()) << c.name;
        } else {
            ASSERT_FALSE(r.skipped.empty()) << c.name;
            EXPECT_NE(r.skipped.front().find(c.reason), std::string::npos) << r.skipped.front();
        }
    }
}

TEST_F(ConcatLinear, MergesInsideBlocksOnly) {
    auto model = testing::make_module("Loop",
                                      "def forward(self, x, n: int):\n"
                                      "    y = self.v.forward(x)\n"
                                      "    for i in range(n):\n"
                                      "        y = y + torch.cat([self.q.forward(x), self.k.forward(x)], -1)\n"
                                      "    return y\n",
                                      {}, qkv());
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    EXPECT_EQ(concat_linear(frozen.graph).count, 2);  // q and k in the loop body; v stays outside
    expect_same(frozen, original, {at::randn({3, kHidden}), int64_t(2)});
}

}  // namespace
}  // namespace ipex::passes
