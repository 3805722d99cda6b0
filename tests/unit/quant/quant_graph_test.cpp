#include <gtest/gtest.h>

#include <string>

#include "pass_test_utils.h"
#include "quant/quant_graph.h"

namespace ipex::quant {
namespace {

// Quantizable ops inside if/loop blocks are reported once per module, op kind and block, with
// their number; top-level ops are not reported.
TEST(NestedQuantOps, OneLinePerModuleKindAndBlock) {
    auto model = passes::testing::make_module(
        "Nested",
        "def forward(self, x):\n"
        "    y = self.top.forward(x)\n"
        "    if bool(x.sum() > 0):\n"
        "        y = self.fc.forward(self.fc.forward(y))\n"
        "    else:\n"
        "        y = self.fc.forward(y)\n"
        "    for _ in range(x.size(0)):\n"
        "        y = self.head.forward(y)\n"
        "    return y\n",
        {},
        {{"top", passes::testing::linear_module(4, 4)},
         {"fc", passes::testing::linear_module(4, 4)},
         {"head", passes::testing::linear_module(4, 4)}});
    auto frozen = passes::testing::freeze(model);
    const std::vector<std::string> found = nested_quant_ops(frozen.graph);
    ASSERT_EQ(found.size(), 2u) << ::testing::PrintToString(found);
    EXPECT_EQ(found[0].rfind("fc: linear (3 ops) inside a prim::If block stay fp32", 0), 0u) << found[0];
    EXPECT_EQ(found[1].rfind("head: linear inside a prim::Loop body stays fp32", 0), 0u) << found[1];
}

// An int8 model's preparation runs no prepacked-mode rewrite: a cat read by a 1x1 convolution
// stays a cat (its convolution one quantizable op, not split), a norm before a convolution
// stays aten::batch_norm (calibration observes the model's own ops).
TEST(PrepareForQuantization, KeepsCatsAndNorms) {
    auto model = passes::testing::make_module(
        "CatNorm",
        "def forward(self, x):\n"
        "    y = torch.cat([self.a.forward(x), self.b.forward(x)], 1)\n"
        "    return self.sq.forward(torch.relu(self.bn.forward(y)))\n",
        {},
        {{"a", passes::testing::conv_module({"conv2d", 4, 6, 3, 1, 1, 1, true})},
         {"b", passes::testing::conv_module({"conv2d", 4, 10, 1, 1, 1, 0, true})},
         {"bn", passes::testing::batch_norm_module(16)},
         {"sq", passes::testing::conv_module({"conv2d", 16, 4, 1, 1, 1, 0, true})}});
    model.eval();
    const PreparedModel prepared = prepare_for_quantization(model);
    EXPECT_EQ(passes::testing::count(prepared.graph, "aten::cat"), 1) << *prepared.graph;
    EXPECT_EQ(passes::testing::count(prepared.graph, "aten::batch_norm"), 1) << *prepared.graph;
    EXPECT_EQ(passes::testing::count(prepared.graph, "ipex::norm_relu"), 0) << *prepared.graph;
    EXPECT_EQ(prepared.ops.size(), 3u);
    for (const auto &entry : prepared.report["passes"]) {
        const std::string name = entry["name"];
        if (name == "split_cat_conv" || name == "fuse_norm_relu" || name == "fuse_channel_shuffle" ||
            name == "replace_mul")
            EXPECT_EQ(entry["status"], "disabled") << name;
    }
}

}  // namespace
}  // namespace ipex::quant
