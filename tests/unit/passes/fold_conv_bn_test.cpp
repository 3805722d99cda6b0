#include <gtest/gtest.h>

#include "pass_test_utils.h"
#include "passes/fold_conv_bn.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using testing::ConvSpec;

// conv -> bn, scripted as two submodules "conv" and "bn".
torch::jit::Module conv_bn(const ConvSpec &spec, int64_t bn_channels = -1, bool affine = true) {
    return testing::make_module(
        "ConvBn", "def forward(self, x):\n    return self.bn.forward(self.conv.forward(x))\n", {},
        {{"conv", testing::conv_module(spec)},
         {"bn", testing::batch_norm_module(bn_channels < 0 ? spec.out : bn_channels, affine)}});
}

at::Tensor input_for(const ConvSpec &spec, int64_t batch = 2, int64_t size = 9) {
    std::vector<int64_t> shape = {batch, spec.in};
    const int64_t rank = spec.op[spec.op.size() - 2] - '0';
    for (int64_t i = 0; i < rank; ++i) shape.push_back(size);
    return at::randn(shape);
}

// Folds, checks that no batch_norm is left and that outputs match the original graph.
void expect_folds(const torch::jit::Module &model, const at::Tensor &x, int expected_folds = 1) {
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    ASSERT_EQ(testing::count(frozen.graph, "aten::batch_norm"), expected_folds);
    const PassResult r = fold_conv_bn(frozen.graph);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.count, expected_folds);
    EXPECT_TRUE(r.skipped.empty()) << r.skipped.front();
    EXPECT_EQ(testing::count(frozen.graph, "aten::batch_norm"), 0);
    const auto want = testing::run_graph(original, frozen.module, {x});
    const auto got = testing::run_graph(frozen.graph, frozen.module, {x});
    EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance);
}

class FoldConvBn : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(FoldConvBn, Conv2dWithBias) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    expect_folds(conv_bn(spec), input_for(spec));
}

TEST_F(FoldConvBn, Conv2dWithoutBias) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 2, 1, false};
    expect_folds(conv_bn(spec), input_for(spec));
}

TEST_F(FoldConvBn, Conv1d) {
    const ConvSpec spec{"conv1d", 3, 6, 5, 1, 1, 2, true};
    expect_folds(conv_bn(spec), input_for(spec, 2, 17));
}

TEST_F(FoldConvBn, Conv3d) {
    const ConvSpec spec{"conv3d", 2, 4, 3, 1, 1, 1, false};
    expect_folds(conv_bn(spec), input_for(spec, 1, 6));
}

TEST_F(FoldConvBn, Depthwise) {
    const ConvSpec spec{"conv2d", 8, 8, 3, 8, 1, 1, true};
    expect_folds(conv_bn(spec), input_for(spec));
}

TEST_F(FoldConvBn, GroupedConv) {
    const ConvSpec spec{"conv2d", 6, 9, 3, 3, 1, 1, true};
    expect_folds(conv_bn(spec), input_for(spec));
}

TEST_F(FoldConvBn, ConvTranspose2dGroupedUnequalChannels) {
    const ConvSpec spec{"conv_transpose2d", 4, 6, 3, 2, 2, 1, true};
    expect_folds(conv_bn(spec), input_for(spec));
}

TEST_F(FoldConvBn, ConvTranspose2dNoBias) {
    const ConvSpec spec{"conv_transpose2d", 3, 5, 2, 1, 2, 0, false};
    expect_folds(conv_bn(spec), input_for(spec));
}

TEST_F(FoldConvBn, ConvTranspose1dAnd3d) {
    const ConvSpec spec1{"conv_transpose1d", 4, 8, 3, 4, 1, 0, true};
    expect_folds(conv_bn(spec1), input_for(spec1, 2, 11));
    const ConvSpec spec3{"conv_transpose3d", 2, 4, 2, 2, 1, 0, true};
    expect_folds(conv_bn(spec3), input_for(spec3, 1, 5));
}

TEST_F(FoldConvBn, BatchNormWithoutAffine) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    expect_folds(conv_bn(spec, -1, /*affine=*/false), input_for(spec));
}

// Traced models call aten::_convolution (transposed flag and groups as arguments).
TEST_F(FoldConvBn, TracedConvolutionForms) {
    const auto make = [](bool transposed, int64_t groups) {
        const at::Tensor weight = transposed ? at::randn({4, 6 / groups, 3, 3}) : at::randn({6, 4 / groups, 3, 3});
        const std::string t = transposed ? "True" : "False";
        auto conv = testing::make_module(
            "TracedConv",
            "def forward(self, x):\n    return torch._convolution(x, self.weight, self.bias, [2, 2], [1, 1], [1, 1], " +
                t + ", [1, 1], " + std::to_string(groups) + ", False, False, True, True)\n",
            {{"weight", weight}, {"bias", at::randn({6})}});
        return testing::make_module("M", "def forward(self, x):\n    return self.bn.forward(self.conv.forward(x))\n", {},
                                    {{"conv", conv}, {"bn", testing::batch_norm_module(6)}});
    };
    expect_folds(make(false, 1), at::randn({2, 4, 8, 8}));
    expect_folds(make(false, 2), at::randn({2, 4, 8, 8}));
    expect_folds(make(true, 2), at::randn({2, 4, 8, 8}));
}

TEST_F(FoldConvBn, FoldsInsideControlFlow) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    auto model = testing::make_module(
        "Branchy",
        "def forward(self, x, n: int):\n"
        "    y = x\n"
        "    if n > 0:\n"
        "        y = self.bn.forward(self.conv.forward(x))\n"
        "    for i in range(n):\n"
        "        y = y + self.bn2.forward(self.conv2.forward(x))\n"
        "    return y\n",
        {},
        {{"conv", testing::conv_module(spec)}, {"bn", testing::batch_norm_module(8)},
         {"conv2", testing::conv_module(spec)}, {"bn2", testing::batch_norm_module(8)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    const PassResult r = fold_conv_bn(frozen.graph);
    EXPECT_EQ(r.count, 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::batch_norm"), 0);
    const at::Tensor x = input_for(spec);
    for (int64_t n : {0, 1, 3}) {
        const auto want = testing::run_graph(original, frozen.module, {x, n});
        const auto got = testing::run_graph(frozen.graph, frozen.module, {x, n});
        EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance) << "n=" << n;
    }
}

TEST_F(FoldConvBn, ReportsModulePaths) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    auto model = testing::make_module("Net", "def forward(self, x):\n    return self.block.forward(x)\n", {},
                                      {{"block", conv_bn(spec)}});
    auto frozen = testing::freeze(model);
    const PassResult r = fold_conv_bn(frozen.graph);
    ASSERT_EQ(r.count, 1);
    EXPECT_EQ(r.modules, (std::vector<std::string>{"block.conv", "block.bn"}));
}

// Scripted nn.BatchNorm2d checks input.dim() before batch_norm: a shape query, not a user.
TEST_F(FoldConvBn, FoldsWhenBatchNormChecksInputRank) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    auto bn = testing::make_module(
        "CheckedBn",
        "def forward(self, x):\n"
        "    assert x.dim() == 4\n"
        "    return self.bn.forward(x)\n",
        {}, {{"bn", testing::batch_norm_module(8)}});
    auto model = testing::make_module("M", "def forward(self, x):\n    return self.bn.forward(self.conv.forward(x))\n",
                                      {}, {{"conv", testing::conv_module(spec)}, {"bn", bn}});
    expect_folds(model, input_for(spec));
}

// ---- must not fold -------------------------------------------------------------------------

void expect_skipped(torch::jit::Module model, const std::string &reason_part) {
    auto frozen = testing::freeze(std::move(model));
    const std::string before = frozen.graph->toString();
    const PassResult r = fold_conv_bn(frozen.graph);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(r.count, 0);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped.front().find(reason_part), std::string::npos) << r.skipped.front();
    EXPECT_EQ(frozen.graph->toString(), before);  // untouched
}

TEST_F(FoldConvBn, SkipsConvOutputWithSecondUser) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    expect_skipped(testing::make_module("TwoUsers",
                                        "def forward(self, x):\n    y = self.conv.forward(x)\n    return self.bn.forward(y) + y\n", {},
                                        {{"conv", testing::conv_module(spec)}, {"bn", testing::batch_norm_module(8)}}),
                   "other users");
}

TEST_F(FoldConvBn, SkipsConvOutputThatIsReturned) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    expect_skipped(testing::make_module("Returned",
                                        "def forward(self, x):\n    y = self.conv.forward(x)\n    return self.bn.forward(y), y\n", {},
                                        {{"conv", testing::conv_module(spec)}, {"bn", testing::batch_norm_module(8)}}),
                   "returned");
}

TEST_F(FoldConvBn, SkipsMismatchedChannels) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    expect_skipped(conv_bn(spec, /*bn_channels=*/4), "output channels");
}

TEST_F(FoldConvBn, SkipsNonConstantWeight) {
    auto model = testing::make_module(
        "WeightInput",
        "def forward(self, x, w):\n    return self.bn.forward(torch.conv2d(x, w, None, [1, 1], [1, 1], [1, 1], 1))\n", {},
        {{"bn", testing::batch_norm_module(8)}});
    expect_skipped(model, "not a constant");
}

TEST_F(FoldConvBn, SkipsBatchNormInTrainingMode) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    auto model = testing::make_module(
        "TrainBn",
        "def forward(self, x):\n    return torch.batch_norm(self.conv.forward(x), None, None, None, None, True, 0.1, 1e-5, False)\n",
        {}, {{"conv", testing::conv_module(spec)}});
    expect_skipped(model, "training");
}

TEST_F(FoldConvBn, NoOpWithoutBatchNorm) {
    const ConvSpec spec{"conv2d", 4, 8, 3, 1, 1, 1, true};
    auto frozen = testing::freeze(testing::conv_module(spec));
    const PassResult r = fold_conv_bn(frozen.graph);
    EXPECT_FALSE(r.changed);
    EXPECT_TRUE(r.skipped.empty());
}

}  // namespace
}  // namespace ipex::passes
