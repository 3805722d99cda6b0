#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ipex::quant
