// split_cat_conv on frozen scripted modules: a concatenation along channels read only by 1x1
// convolutions (directly or through max pools) is no longer made, each convolution running
// once per part with its weight's columns split; op counts before and after, the report's
// details and skips, outputs against the unmodified graph for NCHW and channels-last
// inputs.
#include <gtest/gtest.h>

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/split_cat_conv.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

struct SplitCase {
    std::string name;
    std::string body;  // forward(self, x); self.a: 4 -> 6 (3x3), self.b: 4 -> 10 (1x1),
                       // self.sq: 16 -> 4 (1x1), self.sq2: 16 -> 3 (1x1), self.wide: 16 -> 32 (1x1),
                       // self.k3: 16 -> 4 (3x3), self.s2: 16 -> 4 (1x1, stride 2),
                       // self.half: 16 -> 9 (1x1)
    int cats_removed;  // aten::cat removed
    int convs_split, pools_split;
    int skipped;       // entries in skipped
};

torch::jit::Module net(const std::string &body) {
    return testing::make_module(
        "Net", "def forward(self, x):\n" + body, {},
        {{"a", testing::conv_module({"conv2d", 4, 6, 3, 1, 1, 1, true})},
         {"b", testing::conv_module({"conv2d", 4, 10, 1, 1, 1, 0, true})},
         {"sq", testing::conv_module({"conv2d", 16, 4, 1, 1, 1, 0, true})},
         {"sq2", testing::conv_module({"conv2d", 16, 3, 1, 1, 1, 0, false})},
         {"wide", testing::conv_module({"conv2d", 16, 32, 1, 1, 1, 0, true})},
         {"k3", testing::conv_module({"conv2d", 16, 4, 3, 1, 1, 1, true})},
         {"s2", testing::conv_module({"conv2d", 16, 4, 1, 1, 2, 0, true})},
         {"half", testing::conv_module({"conv2d", 16, 9, 1, 1, 1, 0, true})}});
}

class SplitCatConv : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitCatConv, CountsAndOutputs) {
    const SplitCase &c = GetParam();
    auto frozen = testing::freeze(net(c.body));
    const GraphPtr original = frozen.graph->copy();
    const int cats = testing::count(original, "aten::cat");
    const int convs = testing::count(original, "aten::conv2d");
    const int pools = testing::count(original, "aten::max_pool2d");
    const PassResult r = split_cat_conv(frozen.graph);
    torch::jit::EliminateDeadCode(frozen.graph);
    EXPECT_EQ(testing::count(frozen.graph, "aten::cat"), cats - c.cats_removed) << *frozen.graph;
    // two parts each: a split convolution becomes two and an add; a pool two pools
    EXPECT_EQ(testing::count(frozen.graph, "aten::conv2d"), convs + c.convs_split) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::add"), c.convs_split) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::max_pool2d"), pools + c.pools_split) << *frozen.graph;
    EXPECT_EQ(r.count, c.cats_removed);
    EXPECT_EQ(r.changed, c.cats_removed > 0);
    EXPECT_EQ(r.details["cats_removed"].get<int>(), c.cats_removed);
    EXPECT_EQ(r.details["convs_split"].get<int>(), c.convs_split);
    EXPECT_EQ(r.details["pools_split"].get<int>(), c.pools_split);
    EXPECT_EQ(static_cast<int>(r.skipped.size()), c.skipped) << (r.skipped.empty() ? "" : r.skipped[0]);
    for (const bool channels_last : {false, true}) {
        at::Tensor x = at::randn({2, 4, 11, 9});
        if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
        const auto want = testing::run_graph(original, frozen.module, {x});
        const auto got = testing::run_graph(frozen.graph, frozen.module, {x});
        const auto got_t = testing::flatten_tensors(got), want_t = testing::flatten_tensors(want);
        ASSERT_EQ(got_t.size(), want_t.size());
        for (size_t i = 0; i < got_t.size(); ++i) EXPECT_EQ(got_t[i].sizes(), want_t[i].sizes()) << c.name;
        // the same products summed in another order
        EXPECT_LE(testing::max_relative_error(got, want), 1e-5)
            << c.name << (channels_last ? " channels-last" : "") << "\n" << *frozen.graph;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Forms, SplitCatConv,
    ::testing::Values(
        // SqueezeNet's fire module and the next one's squeeze
        SplitCase{"fire", "    y = torch.cat([torch.relu(self.a.forward(x)), torch.relu_(self.b.forward(x))], 1)\n"
                          "    return torch.relu(self.sq.forward(y))\n", 1, 1, 0, 0},
        SplitCase{"two_convs", "    y = torch.cat([self.a.forward(x), self.b.forward(x)], 1)\n"
                               "    return self.sq.forward(y) * 2, self.sq2.forward(y)\n", 1, 2, 0, 0},
        SplitCase{"through_max_pool",
                  "    y = torch.cat([torch.relu(self.a.forward(x)), self.b.forward(x)], 1)\n"
                  "    return self.sq.forward(torch.max_pool2d(y, [3, 3], [2, 2], [0, 0], [1, 1], True))\n", 1, 1, 1, 0},
        SplitCase{"conv_and_pool", "    y = torch.cat([self.a.forward(x), self.b.forward(x)], 1)\n"
                                   "    return self.sq.forward(y), self.sq2.forward(torch.max_pool2d(y, [2, 2]))\n",
                  1, 2, 1, 0},
        // left alone: the cat is also returned, read by a 3x3 or strided conv, or the
        // convolution is as wide as its input (the sums would move more than the cat)
        SplitCase{"cat_returned", "    y = torch.cat([self.a.forward(x), self.b.forward(x)], 1)\n"
                                  "    return self.sq.forward(y), y\n", 0, 0, 0, 0},
        SplitCase{"three_by_three", "    y = torch.cat([self.a.forward(x), self.b.forward(x)], 1)\n"
                                    "    return self.k3.forward(y)\n", 0, 0, 0, 0},
        SplitCase{"strided", "    y = torch.cat([self.a.forward(x), self.b.forward(x)], 1)\n"
                             "    return self.s2.forward(y)\n", 0, 0, 0, 0},
        SplitCase{"wide", "    y = torch.cat([self.a.forward(x), self.b.forward(x)], 1)\n"
                          "    return self.wide.forward(y)\n", 0, 0, 0, 1},
        // each narrow enough alone, not together: 4 + 3 + 9 output channels of 16
        SplitCase{"outputs_too_wide_together", "    y = torch.cat([self.a.forward(x), self.b.forward(x)], 1)\n"
                                               "    return self.sq.forward(y), self.sq2.forward(y), self.half.forward(y)\n",
                  0, 0, 0, 1},
        // a part whose channels nothing says (a graph input of unknown shape)
        SplitCase{"unknown_channels", "    y = torch.cat([self.a.forward(x), torch.cat([x, x, x], 1)[:, :10]], 1)\n"
                                      "    return self.sq.forward(y)\n", 0, 0, 0, 1},
        SplitCase{"other_dim", "    y = torch.cat([self.a.forward(x), self.a.forward(x)], 0)\n"
                               "    return self.wide.forward(torch.cat([y, y, y], 1)[:, :16])\n", 0, 0, 0, 0}),
    [](const ::testing::TestParamInfo<SplitCase> &info) { return info.param.name; });

}  // namespace
}  // namespace ipex::passes
