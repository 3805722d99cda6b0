// contiguous_before_view after the layout-changing passes (prepack_weights, to_channels_last):
// views of conv activations run and match the unmodified graph, writes through a view reach
// later readers of the base, and graphs without convolutions are left alone.
#include <gtest/gtest.h>

#include "pass_test_utils.h"
#include "passes/contiguous_before_view.h"
#include "passes/prepack_weights.h"
#include "passes/to_channels_last.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

torch::jit::Module net(const std::string &body) {
    return testing::make_module("Net", "def forward(self, x):\n" + body,
                                {{"w", at::randn({8, 3, 3, 3}) * 0.3}, {"b", at::randn({8})}});
}

const std::string kConv = "    y = torch.relu(torch.conv2d(x, self.w, self.b, [1, 1], [1, 1], [1, 1], 1))\n";

struct Case {
    std::string name, body;
    int views;  // views covered
};

const std::vector<Case> &cases() {
    static const std::vector<Case> list = {
        {"flatten_by_view", kConv + "    return torch.max_pool2d(y, [2, 2]).view(x.size(0), -1)\n", 1},
        {"view_as", kConv + "    return y.view_as(torch.zeros([x.size(0), 8 * 10 * 12]))\n", 1},
        {"write_through_view", kConv + "    y.view(-1).mul_(2.0)\n    return y + 1.0\n", 1},
        // A detector head's: the channels split, then permuted last (a view on channels-last).
        {"split_channels",
         kConv + "    z = y.view(x.size(0), 2, 4, 10, 12).permute(0, 3, 4, 1, 2)\n    return z.reshape(x.size(0), -1, 4)\n",
         1},
        {"write_through_split_view", kConv + "    y.view(x.size(0), 2, 4, 10, 12).mul_(2.0)\n    return y + 1.0\n", 1},
        {"view_in_branch",
         kConv + "    if bool(x.sum() > 0):\n        z = y.view(-1)\n    else:\n        z = y.view(-1) * 2.0\n"
                 "    return z\n",
         2},
        {"no_conv_upstream", "    z = x.view(x.size(0), -1)\n    return torch.relu(z)\n", 0},
        {"reset_by_matmul",
         kConv + "    z = torch.matmul(y.flatten(2), y.flatten(2).transpose(1, 2))\n    return z.view(x.size(0), -1)\n", 0},
    };
    return list;
}

// Each case under both layout changers, at batch 1 and 3: same outputs as the original.
TEST(ContiguousBeforeView, ViewsOfConvActivationsRun) {
    const std::vector<std::pair<std::string, std::function<void(GraphPtr &)>>> changers = {
        {"prepack_weights", [](GraphPtr &g) { prepack_weights(g, PrepackOptions{}); }},
        {"to_channels_last", [](GraphPtr &g) { to_channels_last(g); }},
    };
    for (const auto &c : cases()) {
        for (const auto &[changer, change] : changers) {
            auto frozen = testing::freeze(net(c.body));
            const GraphPtr original = frozen.graph->copy();
            change(frozen.graph);
            // A graph with ipex ops takes ipex::contiguous_for_view, an aten-only one aten::contiguous.
            const std::string kind = changer == "prepack_weights" ? "ipex::contiguous_for_view" : "aten::contiguous";
            const int before = testing::count(frozen.graph, kind);
            const int aten_before = testing::count(frozen.graph, "aten::contiguous");
            const PassResult r = contiguous_before_view(frozen.graph);
            frozen.graph->lint();
            EXPECT_EQ(r.count, c.views) << c.name << " " << changer << *frozen.graph;
            if (changer == "prepack_weights")
                EXPECT_EQ(contiguous_before_view(frozen.graph).count, 0) << c.name << ": a second run adds nothing";
            EXPECT_EQ(testing::count(frozen.graph, kind) - before, c.views) << c.name << " " << changer;
            if (kind != "aten::contiguous")
                EXPECT_EQ(testing::count(frozen.graph, "aten::contiguous"), aten_before) << c.name;
            for (int64_t batch : {1, 3}) {
                const at::Tensor x = at::randn({batch, 3, 10, 12}) + (c.name == "view_in_branch" ? 0.5 : 0.0);
                const auto want = testing::run_graph(original, frozen.module, {x.clone()});
                const auto got = testing::run_graph(frozen.graph, frozen.module, {x.clone()});
                EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance) << c.name << " " << changer;
            }
        }
    }
}

// Without the pass, the flattening view of a prepacked conv's channels-last output fails:
// the case the pass exists for.
TEST(ContiguousBeforeView, WithoutThePassTheViewFails) {
    auto frozen = testing::freeze(net(cases()[0].body));
    prepack_weights(frozen.graph, PrepackOptions{});
    EXPECT_THROW(testing::run_graph(frozen.graph, frozen.module, {at::randn({2, 3, 10, 12})}), std::exception);
}

}  // namespace
}  // namespace ipex::passes
