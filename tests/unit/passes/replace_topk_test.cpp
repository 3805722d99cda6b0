// replace_topk on a frozen scripted module: each aten::topk becomes ipex::topk with its inputs
// (constants or not), both outputs keep their uses, and the outputs equal the unmodified
// graph's, for a row the own kernel takes and for calls it leaves to aten.
#include <gtest/gtest.h>

#include "pass_test_utils.h"
#include "passes/replace_topk.h"

namespace ipex::passes {
namespace {

TEST(ReplaceTopk, EveryTopkAndItsOutputs) {
    auto frozen = testing::freeze(testing::make_module("Net",
                                                       "def forward(self, x, k: int):\n"
                                                       "    v, i = torch.topk(x.flatten(), 200)\n"
                                                       "    w, j = x.topk(k, 0, False)\n"
                                                       "    return v * 2.0, i + 1, w, j\n"));
    const auto original = frozen.graph->copy();
    ASSERT_EQ(testing::count(frozen.graph, "aten::topk"), 2);
    const PassResult r = replace_topk(frozen.graph);
    frozen.graph->lint();
    EXPECT_EQ(r.count, 2);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(testing::count(frozen.graph, "aten::topk"), 0) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::topk"), 2) << *frozen.graph;
    at::manual_seed(2);
    const at::Tensor x = at::randn({300, 100});
    const auto want = testing::flatten_tensors(testing::run_graph(original, frozen.module, {x, int64_t{3}}));
    const auto got = testing::flatten_tensors(testing::run_graph(frozen.graph, frozen.module, {x, int64_t{3}}));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i], want[i])) << "output " << i;
    // A second run finds nothing.
    EXPECT_EQ(replace_topk(frozen.graph).count, 0);
}

}  // namespace
}  // namespace ipex::passes
