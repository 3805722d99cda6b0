// replace_torchvision_ops: torchvision's detection ops (defined here by the ops library under
// their own names) become their ipex:: twins with the same outputs, a view of RoIAlign's output
// still works on a channels-last feature map, and cast_to_lowp then runs RoIAlign on the bf16
// feature map instead of casting it back to fp32.
#include <gtest/gtest.h>

#include "ir/graph_utils.h"
#include "pass_test_utils.h"
#include "passes/cast_to_lowp.h"
#include "passes/replace_torchvision_ops.h"
#include "unit/ops/ops_test_utils.h"

namespace ipex::passes {
namespace {

constexpr double kDetectionTolerance = 1e-6;  // the same kernels: equal but for layout

int count_prefix(const std::shared_ptr<torch::jit::Graph> &graph, const std::string &ns) {
    int n = 0;
    for (const auto &[kind, count] : op_histogram(*graph))
        if (kind.rfind(ns, 0) == 0) n += count;
    return n;
}

// A scripted module that may call torch.ops.<namespace>.<op>.
torch::jit::Module scripted(const std::string &name, const std::string &source, const testing::Params &params = {}) {
    torch::jit::Module module(name);
    module.register_attribute("training", c10::BoolType::get(), true);
    for (const auto &[param, tensor] : params) module.register_parameter(param, tensor, false);
    ops::testing::define(module, source);
    return module;
}

// Boxes in (batch index, x1, y1, x2, y2), some past the borders.
at::Tensor rois(int64_t k) {
    at::Tensor b = at::rand({k, 4}) * 20 - 2;
    b.slice(1, 2, 4).add_(b.slice(1, 0, 2).abs() + 1);
    return at::cat({at::zeros({k, 1}), b}, 1);
}

class ReplaceTorchvisionOps : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(ReplaceTorchvisionOps, EveryOpBecomesItsTwin) {
    const std::string source =
        "def forward(self, x, rois, scores):\n"
        "    x = x.contiguous(memory_format=2)  # channels_last\n"
        "    a = torch.ops.torchvision.roi_align(x, rois, 0.5, 7, 7, 2, True)\n"
        "    p, _0 = torch.ops.torchvision.ps_roi_align(x, rois, 0.5, 2, 2, 2)\n"
        "    m, _1 = torch.ops.torchvision.roi_pool(x, rois, 0.5, 3, 3)\n"
        "    keep = torch.ops.torchvision.nms(rois[:, 1:], scores, 0.5)\n"
        "    return a.view(a.size(0), -1), p, m, keep\n";
    auto frozen = testing::freeze(scripted("Detection", source));
    const auto original = frozen.graph->copy();
    EXPECT_EQ(count_prefix(frozen.graph, "torchvision::"), 4);
    const int copies = testing::count(frozen.graph, "aten::contiguous");
    const PassResult r = replace_torchvision_ops(frozen.graph);
    EXPECT_EQ(r.count, 4);
    EXPECT_EQ(count_prefix(frozen.graph, "torchvision::"), 0);
    for (const char *op : {"ipex::roi_align", "ipex::ps_roi_align", "ipex::roi_pool", "ipex::nms"})
        EXPECT_EQ(testing::count(frozen.graph, op), 1) << op;
    EXPECT_EQ(testing::count(frozen.graph, "aten::contiguous"), copies + 1);  // before the view
    const std::vector<c10::IValue> x{at::randn({1, 8, 16, 16}), rois(9), at::rand({9})};
    const auto got = testing::run_graph(frozen.graph, frozen.module, x);
    const auto want = testing::run_graph(original, frozen.module, x);
    EXPECT_LE(testing::max_relative_error(got, want), kDetectionTolerance);
}

TEST_F(ReplaceTorchvisionOps, NoOpWithoutTorchvisionOps) {
    auto frozen = testing::freeze(testing::conv_module({}));
    EXPECT_FALSE(replace_torchvision_ops(frozen.graph).changed);
}

// A box head's start: convolution, RoIAlign, flatten, linear. In bf16 the RoIAlign reads the
// convolution's bf16 output; no cast back to fp32 is put before it.
TEST_F(ReplaceTorchvisionOps, RoiAlignRunsInBf16AfterTheCast) {
    const std::string source =
        "def forward(self, x, rois):\n"
        "    y = torch.conv2d(x, self.weight, self.bias, 1, 1)\n"
        "    a = torch.ops.torchvision.roi_align(y, rois, 0.5, 4, 4, 2, False)\n"
        "    return torch.linear(a.flatten(1), self.fc)\n";
    auto frozen = testing::freeze(scripted(
        "BoxHead", source,
        {{"weight", at::randn({8, 3, 3, 3}) * 0.2}, {"bias", at::randn({8})}, {"fc", at::randn({5, 8 * 16}) * 0.1}}));
    const auto original = frozen.graph->copy();
    ASSERT_EQ(replace_torchvision_ops(frozen.graph).count, 1);
    ASSERT_TRUE(cast_to_lowp(frozen.graph, at::kBFloat16, false).changed);
    int seen = 0;
    for (const torch::jit::Node *node : frozen.graph->nodes()) {
        if (node->kind() != c10::Symbol::fromQualString("ipex::roi_align")) continue;
        ++seen;
        const torch::jit::Node *source_node = node->input(0)->node();
        EXPECT_NE(source_node->kind(), c10::aten::to) << *frozen.graph;
        EXPECT_NE(source_node->kind(), c10::aten::type_as) << *frozen.graph;
    }
    EXPECT_EQ(seen, 1);
    const std::vector<c10::IValue> x{at::randn({1, 3, 16, 16}), rois(6)};
    EXPECT_GE(testing::cosine_similarity(testing::run_graph(frozen.graph, frozen.module, x),
                                         testing::run_graph(original, frozen.module, x)),
              testing::kLowpMinCosine);
}

}  // namespace
}  // namespace ipex::passes
