// chain_convolutions on frozen scripted modules after prepacking and the fusions: op counts
// before and after, which convolutions end up in which chain, the report, and outputs against
// the unchained graph with every batch split into single images (IPEX_CONV_CHAIN_BYTES=1).
#include <gtest/gtest.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/chain_convolutions.h"
#include "passes/fuse_conv_sum.h"
#include "passes/fuse_eltwise.h"
#include "passes/prepack_weights.h"
#include "passes/replace_pooling.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

// torch.conv2d with w<i>/b<i>: 1 and 3 are 8 -> 8 3x3, 2 is a 1x1 8 -> 16 expansion,
// 4 a stride-2 depthwise 3x3 on 16 channels, 5 a 1x1 16 -> 8 projection.
std::string conv(const std::string &x, int i) {
    const std::string n = std::to_string(i);
    const std::string stride = i == 4 ? "[2, 2]" : "[1, 1]", padding = i == 2 || i == 5 ? "[0, 0]" : "[1, 1]";
    const std::string groups = i == 4 ? "16" : "1";
    return "torch.conv2d(" + x + ", self.w" + n + ", self.b" + n + ", " + stride + ", " + padding + ", [1, 1], " +
           groups + ")";
}

torch::jit::Module net(const std::string &body) {
    testing::Params params = {{"w1", at::randn({8, 8, 3, 3}) * 0.2}, {"b1", at::randn({8})},
                              {"w2", at::randn({16, 8, 1, 1}) * 0.3}, {"b2", at::randn({16})},
                              {"w3", at::randn({8, 8, 3, 3}) * 0.2}, {"b3", at::randn({8})},
                              {"w4", at::randn({16, 1, 3, 3}) * 0.3}, {"b4", at::randn({16})},
                              {"w5", at::randn({8, 16, 1, 1}) * 0.3}, {"b5", at::randn({8})}};
    return testing::make_module("Net", "def forward(self, x):\n" + body, params);
}

struct ChainCase {
    std::string name;
    std::string body;
    int chains;                   // ipex::convolution_chain after
    int convolutions_in_chains;   // details.convolutions
    int left;                     // ipex::convolution after
    int pooled = 0;               // of the chains, ipex::convolution_max_pool ones
};

class ChainConvolutions : public ::testing::TestWithParam<ChainCase> {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_P(ChainConvolutions, CountsAndOutputs) {
    const ChainCase &c = GetParam();
    auto frozen = testing::freeze(net(c.body));
    prepack_weights(frozen.graph, PrepackOptions{});
    for (bool changed = true; changed;)
        changed = fuse_eltwise(frozen.graph).changed | fuse_conv_sum(frozen.graph).changed;
    replace_pooling(frozen.graph, true);
    torch::jit::EliminateDeadCode(frozen.graph);
    const GraphPtr unchained = frozen.graph->copy();
    const int before = testing::count(unchained, "ipex::convolution");
    const int pools_before = testing::count(unchained, "ipex::max_pool2d");
    const PassResult r = chain_convolutions(frozen.graph);
    frozen.graph->lint();
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution_chain"), c.chains - c.pooled) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution_max_pool"), c.pooled) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::max_pool2d"), pools_before - c.pooled) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution"), c.left) << *frozen.graph;
    EXPECT_EQ(before, c.left + c.convolutions_in_chains);
    EXPECT_EQ(r.count, c.chains);
    EXPECT_EQ(r.changed, c.chains > 0);
    EXPECT_EQ(r.details["chains"].get<int>(), c.chains);
    EXPECT_EQ(r.details["convolutions"].get<int>(), c.convolutions_in_chains);
    EXPECT_EQ(r.details["pooled"].get<int>(), c.pooled);
    EXPECT_EQ(r.modules.size(), static_cast<size_t>(c.chains));
    EXPECT_TRUE(r.skipped.empty());
    for (const auto *node : frozen.graph->nodes()) {
        if (node->kind().toQualString() == std::string("ipex::convolution_chain"))
            EXPECT_GE(chain_contexts(node).size(), 2u);
        if (node->kind().toQualString() == std::string("ipex::convolution_max_pool"))
            EXPECT_GE(chain_contexts(node).size(), 1u);
    }

    const char *old = std::getenv("IPEX_CONV_CHAIN_BYTES");
    const std::string saved = old ? old : "";
    setenv("IPEX_CONV_CHAIN_BYTES", "1", 1);
    const at::Tensor x = at::randn({3, 8, 10, 9});
    const auto want = testing::run_graph(unchained, frozen.module, {x.clone()});
    const auto got = testing::run_graph(frozen.graph, frozen.module, {x.clone()});
    if (old) setenv("IPEX_CONV_CHAIN_BYTES", saved.c_str(), 1); else unsetenv("IPEX_CONV_CHAIN_BYTES");
    EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance) << *frozen.graph;
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, ChainConvolutions,
    ::testing::Values(
        // MobileNet's block: expansion + ReLU, stride-2 depthwise + ReLU, projection: one chain of 3
        ChainCase{"inverted_residual",
                  "    y = torch.relu(" + conv("x", 2) + ")\n    z = torch.relu(" + conv("y", 4) + ")\n"
                  "    return " + conv("z", 5) + "\n", 1, 3, 0},
        // the first output also read by a residual add: no chain
        ChainCase{"residual", "    y = " + conv("x", 1) + "\n    return " + conv("y", 3) + " + y\n", 0, 0, 1},
        // the first output also a graph output: no chain
        ChainCase{"graph_output", "    y = " + conv("x", 1) + "\n    return " + conv("y", 3) + ", y\n", 0, 0, 2},
        // a chain of two ends where its output is read twice; the two readers are not a chain
        ChainCase{"branches",
                  "    y = " + conv("torch.relu(" + conv("x", 1) + ")", 3) + "\n"
                  "    return " + conv("y", 1) + ", " + conv("y", 2) + "\n", 1, 2, 2},
        // a residual sum fused into the second convolution (convolution_sum_) ends the chain before it
        ChainCase{"sum_ends_chain",
                  "    y = " + conv("x", 1) + "\n    z = " + conv("y", 3) + "\n    return " + conv("z", 1) + " + x\n",
                  1, 2, 0},
        // the input written between the first and the second convolution: the chain runs before
        // the write (where the first convolution read the input)
        ChainCase{"input_written",
                  "    y = " + conv("x", 1) + "\n    x.add_(1.0)\n    return " + conv("y", 3) + "\n", 1, 2, 0},
        // one convolution: nothing to chain
        ChainCase{"single", "    return " + conv("x", 1) + "\n", 0, 0, 1},
        // a stem: a convolution (its ReLU fused) and the max pooling after it
        ChainCase{"conv_pool",
                  "    return torch.max_pool2d(torch.relu(" + conv("x", 1) + "), [3, 3], [2, 2], [1, 1], [1, 1], True)\n",
                  1, 1, 0, 1},
        // a chain of three and a dilated pooling after it; the convolution after the pooling is
        // not part of it
        ChainCase{"chain_pool_conv",
                  "    y = torch.relu(" + conv(conv("x", 2), 4) + ")\n"
                  "    z = torch.max_pool2d(" + conv("y", 5) + ", [2, 2], [1, 1], [1, 1], [2, 2], False)\n"
                  "    return " + conv("z", 1) + "\n", 1, 3, 1, 1},
        // the convolution's output also read by an add: the pooling stays apart
        ChainCase{"pool_input_read_twice",
                  "    y = " + conv("x", 1) + "\n"
                  "    return torch.max_pool2d(y, [2, 2], [2, 2], [0, 0], [1, 1], False) + 1.0, y\n", 0, 0, 1},
        // a pooling of the graph input: nothing to take it in
        ChainCase{"pool_of_input",
                  "    return " + conv("torch.max_pool2d(x, [2, 2], [2, 2], [0, 0], [1, 1], False)", 1) + "\n",
                  0, 0, 1}),
    [](const ::testing::TestParamInfo<ChainCase> &info) { return info.param.name; });

}  // namespace
}  // namespace ipex::passes
