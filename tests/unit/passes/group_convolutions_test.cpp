// group_convolutions on frozen scripted modules after prepacking and the fusions: op counts
// before and after, the program of the op made, the report, and outputs against the ungrouped
// graph with every batch split into single images (IPEX_CONV_CHAIN_BYTES=1).
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/fuse_conv_sum.h"
#include "passes/fuse_eltwise.h"
#include "passes/group_convolutions.h"
#include "passes/prepack_weights.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

// torch.conv2d with w<i>/b<i>: 1 is a 1x1 16 -> 4, 2 a 3x3 4 -> 4, 3 a 1x1 4 -> 16 (a
// bottleneck); 4 a 1x1 8 -> 16 (a downsample); 5 a 1x1 8 -> 4 (a first block's conv1).
std::string conv(const std::string &x, int i) {
    const std::string n = std::to_string(i), padding = i == 2 ? "[1, 1]" : "[0, 0]";
    return "torch.conv2d(" + x + ", self.w" + n + ", self.b" + n + ", [1, 1], " + padding + ", [1, 1], 1)";
}

// A bottleneck on y (16 channels): relu(conv3(relu(conv2(relu(conv1(y))))) + y).
std::string block(const std::string &y, const std::string &out) {
    return "    " + out + " = torch.relu(" + conv("torch.relu(" + conv("torch.relu(" + conv(y, 1) + ")", 2) + ")", 3) +
           " + " + y + ")\n";
}

torch::jit::Module net(const std::string &body) {
    testing::Params params = {{"w1", at::randn({4, 16, 1, 1}) * 0.3}, {"b1", at::randn({4})},
                              {"w2", at::randn({4, 4, 3, 3}) * 0.2},  {"b2", at::randn({4})},
                              {"w3", at::randn({16, 4, 1, 1}) * 0.3}, {"b3", at::randn({16})},
                              {"w4", at::randn({16, 8, 1, 1}) * 0.3}, {"b4", at::randn({16})},
                              {"w5", at::randn({4, 8, 1, 1}) * 0.3},  {"b5", at::randn({4})}};
    return testing::make_module("Net", "def forward(self, x):\n" + body, params);
}

struct GroupCase {
    std::string name;
    std::string body;
    int graphs;        // ipex::convolution_graph after
    int convolutions;  // in them
    int sums;          // of which with a sum
    std::vector<int64_t> first_program;  // the first op's program (empty: not checked)
};

class GroupConvolutions : public ::testing::TestWithParam<GroupCase> {
protected:
    void SetUp() override { at::manual_seed(0); }
};

int convolutions_in(const GraphPtr &g) {
    return testing::count(g, "ipex::convolution") + testing::count(g, "ipex::convolution_sum") +
           testing::count(g, "ipex::convolution_sum_");
}

TEST_P(GroupConvolutions, CountsAndOutputs) {
    const GroupCase &c = GetParam();
    auto frozen = testing::freeze(net(c.body));
    prepack_weights(frozen.graph, PrepackOptions{});
    for (bool changed = true; changed;)
        changed = fuse_eltwise(frozen.graph).changed | fuse_conv_sum(frozen.graph).changed;
    torch::jit::EliminateDeadCode(frozen.graph);
    const GraphPtr ungrouped = frozen.graph->copy();
    const PassResult r = group_convolutions(frozen.graph);
    frozen.graph->lint();
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution_graph"), c.graphs) << *frozen.graph;
    EXPECT_EQ(convolutions_in(ungrouped), convolutions_in(frozen.graph) + c.convolutions) << *frozen.graph;
    EXPECT_EQ(r.count, c.graphs);
    EXPECT_EQ(r.changed, c.graphs > 0);
    EXPECT_EQ(r.details["graphs"].get<int>(), c.graphs);
    EXPECT_EQ(r.details["convolutions"].get<int>(), c.convolutions);
    EXPECT_EQ(r.details["sums"].get<int>(), c.sums);
    EXPECT_EQ(r.modules.size(), static_cast<size_t>(c.graphs));
    if (!c.first_program.empty()) {
        for (const auto *node : frozen.graph->nodes()) {
            if (node->kind().toQualString() != std::string("ipex::convolution_graph")) continue;
            EXPECT_EQ(torch::jit::toIValue(node->input(2))->toIntVector(), c.first_program);
            break;
        }
    }

    const char *old = std::getenv("IPEX_CONV_CHAIN_BYTES");
    const std::string saved = old ? old : "";
    setenv("IPEX_CONV_CHAIN_BYTES", "1", 1);
    const at::Tensor x = at::randn({3, 16, 28, 28});
    const at::Tensor x8 = at::randn({3, 8, 28, 28});
    const at::Tensor &in = c.body.find("self.w4") != std::string::npos ? x8 : x;
    const auto want = testing::run_graph(ungrouped, frozen.module, {in.clone()});
    const auto got = testing::run_graph(frozen.graph, frozen.module, {in.clone()});
    if (old) setenv("IPEX_CONV_CHAIN_BYTES", saved.c_str(), 1); else unsetenv("IPEX_CONV_CHAIN_BYTES");
    EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance) << *frozen.graph;
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, GroupConvolutions,
    ::testing::Values(
        // two bottlenecks: one op of 6 convolutions; conv3's sums add the block inputs (values 0, 3)
        GroupCase{"two_blocks", block("x", "y") + block("y", "z") + "    return z\n", 1, 6, 2,
                  {0, -1, 1, -1, 2, 0, 3, -1, 4, -1, 5, 3}},
        // a first block with a downsample convolution of its input as the summand, then a bottleneck
        GroupCase{"downsample",
                  "    d = " + conv("x", 4) + "\n    a = torch.relu(" + conv("torch.relu(" + conv("x", 5) + ")", 2) +
                      ")\n    y = torch.relu(" + conv("a", 3) + " + d)\n" + block("y", "z") + "    return z\n",
                  1, 7, 2, {}},
        // the first block's output also a graph output: each block an op of its own
        GroupCase{"output_read_outside", block("x", "y") + block("y", "z") + "    return z, y\n", 2, 6, 2,
                  {0, -1, 1, -1, 2, 0}},
        // a plain run of convolutions without a sum is left to chain_convolutions
        GroupCase{"no_sum", "    return " + conv("torch.relu(" + conv("x", 1) + ")", 2) + "\n", 0, 0, 0, {}},
        // something else between the blocks: two ops
        GroupCase{"split_by_another_op",
                  block("x", "y") + "    y2 = torch.flip(y, [3])\n" + block("y2", "z") + "    return z\n",
                  2, 6, 2, {}},
        // one block reading two values from before it (x and another input-derived value): none
        GroupCase{"two_inputs",
                  "    s = x * 2.0\n    return torch.relu(" + conv(conv("x", 1), 3) + " + s)\n", 0, 0, 0, {}}),
    [](const ::testing::TestParamInfo<GroupCase> &info) { return info.param.name; });

}  // namespace
}  // namespace ipex::passes
