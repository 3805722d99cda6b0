#include <gtest/gtest.h>

#include "ir/graph_utils.h"
#include "pass_test_utils.h"
#include "passes/fold_conv_frozen_bn.h"

namespace ipex::passes {
namespace {

using testing::ConvSpec;

// torchvision's FrozenBatchNorm2d: fixed statistics as buffers, the affine map written out.
torch::jit::Module frozen_bn_module(int64_t channels) {
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    return testing::make_module(
        "FrozenBatchNorm2d",
        "def forward(self, x):\n"
        "    w = self.weight.reshape(1, -1, 1, 1)\n"
        "    b = self.bias.reshape(1, -1, 1, 1)\n"
        "    rv = self.running_var.reshape(1, -1, 1, 1)\n"
        "    rm = self.running_mean.reshape(1, -1, 1, 1)\n"
        "    scale = w * (rv + 1e-05).rsqrt()\n"
        "    bias = b - rm * scale\n"
        "    return x * scale + bias\n",
        {{"weight", at::rand({channels}, f32) + 0.5},
         {"bias", at::randn({channels}, f32)},
         {"running_mean", at::randn({channels}, f32)},
         {"running_var", at::rand({channels}, f32) + 0.5}});
}

torch::jit::Module conv_frozen_bn(const ConvSpec &spec, const std::string &forward =
                                      "def forward(self, x):\n    return self.bn.forward(self.conv.forward(x))\n") {
    return testing::make_module("ConvFrozenBn", forward, {},
                                {{"conv", testing::conv_module(spec)}, {"bn", frozen_bn_module(spec.out)}});
}

int affine_ops(const std::shared_ptr<torch::jit::Graph> &graph) {
    return testing::count(graph, "aten::mul") + testing::count(graph, "aten::add");
}

class FoldConvFrozenBn : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }

    // Folds the mul and the add, leaves neither, and keeps the outputs.
    void expect_folds(const torch::jit::Module &model, const at::Tensor &x) {
        auto frozen = testing::freeze(model);
        auto original = frozen.graph->copy();
        ASSERT_EQ(affine_ops(frozen.graph), 2);
        const PassResult r = fold_conv_frozen_bn(frozen.graph);
        EXPECT_TRUE(r.changed);
        EXPECT_EQ(r.count, 2);
        EXPECT_EQ(affine_ops(frozen.graph), 0);
        const auto want = testing::run_graph(original, frozen.module, {x});
        const auto got = testing::run_graph(frozen.graph, frozen.module, {x});
        EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance);
    }

    // Leaves the graph as it is, saying why.
    void expect_kept(const torch::jit::Module &model, const std::string &why) {
        auto frozen = testing::freeze(model);
        const int before = affine_ops(frozen.graph);
        const PassResult r = fold_conv_frozen_bn(frozen.graph);
        EXPECT_FALSE(r.changed);
        EXPECT_EQ(affine_ops(frozen.graph), before);
        ASSERT_FALSE(r.skipped.empty());
        EXPECT_NE(r.skipped.front().find(why), std::string::npos) << r.skipped.front();
    }
};

TEST_F(FoldConvFrozenBn, Conv2dWithBias) {
    expect_folds(conv_frozen_bn({"conv2d", 4, 8, 3, 1, 1, 1, true}), at::randn({2, 4, 9, 9}));
}

TEST_F(FoldConvFrozenBn, Conv2dWithoutBiasGroupedStrided) {
    expect_folds(conv_frozen_bn({"conv2d", 4, 8, 3, 2, 2, 1, false}), at::randn({1, 4, 11, 7}));
}

TEST_F(FoldConvFrozenBn, TransposedConvolution) {
    expect_folds(conv_frozen_bn({"conv_transpose2d", 6, 4, 3, 2, 1, 0, true}), at::randn({2, 6, 5, 5}));
}

TEST_F(FoldConvFrozenBn, KeepsAConvOutputTheGraphAlsoReturns) {
    expect_kept(conv_frozen_bn({"conv2d", 4, 8, 3, 1, 1, 1, true},
                               "def forward(self, x):\n    y = self.conv.forward(x)\n    return self.bn.forward(y), y\n"),
                "other users or is returned");
}

TEST_F(FoldConvFrozenBn, KeepsAFactorThatIsNotPerChannel) {
    const auto spatial = at::rand({1, 1, 9, 9}) + 0.5;
    expect_kept(testing::make_module("ConvSpatialScale", "def forward(self, x):\n    return self.conv.forward(x) * self.s\n",
                                     {{"s", spatial}}, {{"conv", testing::conv_module({"conv2d", 4, 8, 3, 1, 1, 1, true})}}),
                "not per-channel");
}

TEST_F(FoldConvFrozenBn, KeepsAFactorOfAnotherDtype) {
    const auto scale = at::rand({1, 8, 1, 1}, at::TensorOptions().dtype(at::kDouble));
    expect_kept(testing::make_module("ConvDoubleScale", "def forward(self, x):\n    return self.conv.forward(x) * self.s\n",
                                     {{"s", scale}}, {{"conv", testing::conv_module({"conv2d", 4, 8, 3, 1, 1, 1, true})}}),
                "dtype");
}

}  // namespace
}  // namespace ipex::passes
