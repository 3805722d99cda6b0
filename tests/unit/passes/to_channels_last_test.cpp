#include <gtest/gtest.h>

#include "pass_test_utils.h"
#include "passes/cast_to_lowp.h"
#include "ir/graph_utils.h"
#include "passes/to_channels_last.h"

namespace ipex::passes {
namespace {

using testing::ConvSpec;

at::Tensor conv_weight(const std::shared_ptr<torch::jit::Graph> &graph, size_t nth = 0) {
    size_t seen = 0;
    for (torch::jit::Node *node : collect_nodes(graph->block())) {
        const std::string kind = node->kind().toQualString();
        if (kind.find("conv") == std::string::npos) continue;
        if (seen++ == nth) return *constant_tensor(input_named(node, "weight"));
    }
    return {};
}

// The strides channels_last gives this shape (Tensor::is_contiguous(format) also accepts
// NCHW strides for 1x1 kernels, which oneDNN does not treat as NHWC).
bool has_channels_last_strides(const at::Tensor &t, c10::MemoryFormat format) {
    return t.strides() == at::empty_like(t, t.options(), format).strides();
}

torch::jit::Module conv_net() {
    return testing::make_module(
        "ConvNet",
        "def forward(self, x):\n"
        "    y = torch.relu(self.conv1.forward(x))\n"
        "    y = torch.relu(self.dw.forward(y))\n"
        "    return self.pw.forward(y) + y.mean()\n",
        {},
        {{"conv1", testing::conv_module({"conv2d", 3, 8, 3, 1, 1, 1, true})},
         {"dw", testing::conv_module({"conv2d", 8, 8, 3, 8, 1, 1, false})},
         {"pw", testing::conv_module({"conv2d", 8, 16, 1, 1, 1, 0, true})}});
}

class ToChannelsLast : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(ToChannelsLast, LibtorchKeepsTheLayoutThroughConv2d) {
    // The premise of the pass, for fp32 and bf16: NHWC weight and input give an NHWC output.
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor x = at::randn({2, 8, 9, 9}).to(dtype).contiguous(c10::MemoryFormat::ChannelsLast);
        const at::Tensor w = at::randn({16, 8, 3, 3}).to(dtype).contiguous(c10::MemoryFormat::ChannelsLast);
        EXPECT_TRUE(at::conv2d(x, w).is_contiguous(c10::MemoryFormat::ChannelsLast)) << dtype;
        // A contiguous input with an NHWC weight also gives NHWC (non-depthwise).
        EXPECT_TRUE(at::conv2d(x.contiguous(), w).is_contiguous(c10::MemoryFormat::ChannelsLast)) << dtype;
    }
    EXPECT_TRUE(conv_keeps_channels_last(4, false));
}

TEST_F(ToChannelsLast, ConvertsWeightsAndKnownRankEntry) {
    auto frozen = testing::freeze(conv_net());
    const at::Tensor x = at::randn({2, 3, 12, 12});
    frozen.graph->inputs()[1]->setType(c10::TensorType::create(x));
    auto original = frozen.graph->copy();
    const PassResult r = to_channels_last(frozen.graph);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.count, 4);  // three weights + one entry conversion
    EXPECT_EQ(r.modules, (std::vector<std::string>{"conv1", "dw", "pw"}));
    for (size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(has_channels_last_strides(conv_weight(frozen.graph, i), c10::MemoryFormat::ChannelsLast)) << i;
    EXPECT_EQ(testing::count(frozen.graph, "aten::contiguous"), 1);
    const auto got = testing::run_graph(frozen.graph, frozen.module, {x});
    EXPECT_LE(testing::max_relative_error(got, testing::run_graph(original, frozen.module, {x})),
              testing::kFp32Tolerance);
    EXPECT_TRUE(got.toTensor().is_contiguous(c10::MemoryFormat::ChannelsLast));
    // A second run finds nothing left to do.
    EXPECT_FALSE(to_channels_last(frozen.graph).changed);
}

TEST_F(ToChannelsLast, LayoutSurvivesBf16Casting) {
    auto frozen = testing::freeze(conv_net());
    const at::Tensor x = at::randn({2, 3, 12, 12});
    frozen.graph->inputs()[1]->setType(c10::TensorType::create(x));
    to_channels_last(frozen.graph);
    cast_to_lowp(frozen.graph, at::kBFloat16, /*keep_dtype_outputs=*/false);
    for (size_t i = 0; i < 3; ++i) {
        const at::Tensor w = conv_weight(frozen.graph, i);
        EXPECT_EQ(w.scalar_type(), at::kBFloat16);
        EXPECT_TRUE(has_channels_last_strides(w, c10::MemoryFormat::ChannelsLast)) << i;
    }
    const auto got = testing::run_graph(frozen.graph, frozen.module, {x}).toTensor();
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_TRUE(got.is_contiguous(c10::MemoryFormat::ChannelsLast));
}

TEST_F(ToChannelsLast, NoEntryConversionWithoutKnownRank) {
    // conv2d also takes unbatched 3-D input: an input of unknown rank is never converted.
    auto frozen = testing::freeze(conv_net());
    auto original = frozen.graph->copy();
    const PassResult r = to_channels_last(frozen.graph);
    EXPECT_EQ(r.count, 3);
    EXPECT_EQ(testing::count(frozen.graph, "aten::contiguous"), 0);
    for (const at::Tensor &x : {at::randn({2, 3, 10, 10}), at::randn({3, 10, 10})}) {
        EXPECT_LE(testing::max_relative_error(testing::run_graph(frozen.graph, frozen.module, {x}),
                                              testing::run_graph(original, frozen.module, {x})),
                  testing::kFp32Tolerance)
            << "input rank " << x.dim();
    }
}

TEST_F(ToChannelsLast, NoEntryConversionForKnownUnbatchedInput) {
    auto frozen = testing::freeze(conv_net());
    const at::Tensor x = at::randn({3, 10, 10});
    frozen.graph->inputs()[1]->setType(c10::TensorType::create(x));
    auto original = frozen.graph->copy();
    to_channels_last(frozen.graph);
    EXPECT_EQ(testing::count(frozen.graph, "aten::contiguous"), 0);
    EXPECT_LE(testing::max_relative_error(testing::run_graph(frozen.graph, frozen.module, {x}),
                                          testing::run_graph(original, frozen.module, {x})),
              testing::kFp32Tolerance);
}

TEST_F(ToChannelsLast, OneByOneKernelGetsRealChannelsLastStrides) {
    auto frozen = testing::freeze(testing::conv_module({"conv2d", 8, 16, 1, 1, 1, 0, true}));
    to_channels_last(frozen.graph);
    const at::Tensor w = conv_weight(frozen.graph);
    EXPECT_TRUE(has_channels_last_strides(w, c10::MemoryFormat::ChannelsLast));
    const auto y = testing::run_graph(frozen.graph, frozen.module, {at::randn({2, 8, 5, 5})}).toTensor();
    EXPECT_TRUE(y.is_contiguous(c10::MemoryFormat::ChannelsLast));
}

TEST_F(ToChannelsLast, SkipsConvKindsThatDropTheLayout) {
    auto model = testing::make_module(
        "Mixed", "def forward(self, x, v):\n    return self.up.forward(x), self.c3.forward(v)\n", {},
        {{"up", testing::conv_module({"conv_transpose2d", 4, 4, 2, 1, 2, 0, true})},
         {"c3", testing::conv_module({"conv3d", 2, 4, 3, 1, 1, 1, true})}});
    auto frozen = testing::freeze(model);
    const bool transposed_ok = conv_keeps_channels_last(4, true);
    const bool conv3d_ok = conv_keeps_channels_last(5, false);
    const PassResult r = to_channels_last(frozen.graph);
    EXPECT_EQ(r.count, int(transposed_ok) + int(conv3d_ok));
    EXPECT_EQ(r.skipped.size(), size_t(!transposed_ok) + size_t(!conv3d_ok));
    for (const auto &reason : r.skipped) EXPECT_NE(reason.find("does not keep"), std::string::npos) << reason;
}

TEST_F(ToChannelsLast, NoOpWithoutConvolutions) {
    auto frozen = testing::freeze(testing::linear_module(4, 4));
    const PassResult r = to_channels_last(frozen.graph);
    EXPECT_FALSE(r.changed);
    EXPECT_TRUE(r.skipped.empty());
}

}  // namespace
}  // namespace ipex::passes
