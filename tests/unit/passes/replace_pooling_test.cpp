// replace_pooling on frozen scripted modules: max_pool2d becomes ipex::max_pool2d (prepacked
// mode only), a global adaptive average pool becomes aten::mean (portable) or
// ipex::spatial_mean (prepacked), as do the model's means over the two spatial dims
// (prepacked); op counts before and after and outputs against the unmodified graph, fp32 and
// bf16, NCHW and channels-last.
#include <gtest/gtest.h>

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <cmath>
#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/replace_pooling.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

struct PoolCase {
    std::string name;
    std::string body;  // forward(self, x)
    int max_pools;     // ipex::max_pool2d after (prepacked)
    int means;         // global pools: aten::mean after (portable), ipex::spatial_mean (prepacked)
    int adaptive_left; // aten::adaptive_avg_pool2d after
    int spatial_means = 0;  // the model's means over dims 2 and 3: ipex::spatial_mean (prepacked)
    int other_means = 0;    // the model's other means, left as they are
    // bf16 error budget in steps of 2^-7 of the largest output (plus 2^-8): 1 where a replaced
    // mean is the output, 2 where a sigmoid and a product follow it.
    int bf16_steps = 1;
};

class ReplacePooling : public ::testing::TestWithParam<PoolCase> {};

TEST_P(ReplacePooling, CountsAndOutputs) {
    const PoolCase &c = GetParam();
    for (const bool prepacked : {true, false}) {
        auto frozen = testing::freeze(testing::make_module("Pool", "def forward(self, x):\n" + c.body, {}));
        const GraphPtr original = frozen.graph->copy();
        const int max_before = testing::count(original, "aten::max_pool2d");
        const PassResult r = replace_pooling(frozen.graph, prepacked);
        torch::jit::EliminateDeadCode(frozen.graph);
        const int max_after = prepacked ? c.max_pools : 0;
        EXPECT_EQ(testing::count(frozen.graph, "ipex::max_pool2d"), max_after) << *frozen.graph;
        EXPECT_EQ(testing::count(frozen.graph, "aten::max_pool2d"), max_before - max_after) << *frozen.graph;
        const int spatial_after = prepacked ? c.means + c.spatial_means : 0;
        EXPECT_EQ(testing::count(frozen.graph, "ipex::spatial_mean"), spatial_after) << *frozen.graph;
        EXPECT_EQ(testing::count(frozen.graph, "aten::mean"),
                  c.means + c.spatial_means + c.other_means - spatial_after)
            << *frozen.graph;
        EXPECT_EQ(testing::count(frozen.graph, "aten::adaptive_avg_pool2d"), c.adaptive_left) << *frozen.graph;
        EXPECT_EQ(r.count, max_after + c.means + (prepacked ? c.spatial_means : 0));
        EXPECT_EQ(r.changed, r.count > 0);
        EXPECT_EQ(r.details["max_pool2d"].get<int>(), max_after);
        EXPECT_EQ(r.details["global_avg_pool"].get<int>(), c.means);
        EXPECT_EQ(r.details["spatial_mean"].get<int>(), spatial_after);
        for (const auto dtype : {at::kFloat, at::kBFloat16}) {
            for (const bool channels_last : {false, true}) {
                at::Tensor x = at::randn({2, 6, 15, 14}).to(dtype);
                if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
                const auto want = testing::run_graph(original, frozen.module, {x});
                const auto got = testing::run_graph(frozen.graph, frozen.module, {x});
                const auto got_t = testing::flatten_tensors(got), want_t = testing::flatten_tensors(want);
                ASSERT_EQ(got_t.size(), want_t.size());
                for (size_t i = 0; i < got_t.size(); ++i) {
                    EXPECT_EQ(got_t[i].sizes(), want_t[i].sizes()) << c.name;
                    EXPECT_EQ(got_t[i].scalar_type(), want_t[i].scalar_type()) << c.name;
                }
                // Maxima are exact; a mean sums in another order than the adaptive pool. In bf16
                // ours rounds once from an fp32 sum (error <= 2^-8 of the value), aten's adaptive
                // pool and mean round the sum and then the quotient (<= 2^-7): the outputs differ
                // by <= 1.5 * 2^-7 of the largest one. Each later bf16 op rounds both sides once
                // more (x * sigmoid(mean): the sigmoid and the product, 2^-8 each per side, plus
                // the mean's difference through sigmoid' <= 1/4 at |mean| < 0.5), about 2^-7 more.
                const double bf16_bound = c.bf16_steps * std::ldexp(1.0, -7) + std::ldexp(1.0, -8);
                // In fp32 each side's sum of n = h * w terms, in any order, is within
                // (n - 1) * 2^-24 * sum |x| of the exact one, so two means differ by at most
                // 2 * n * 2^-24 * mean |x| per (image, channel), plus their last roundings (2^-24
                // each); a sigmoid and a product after it only shrink that. Relative to the largest
                // output, as max_relative_error measures.
                const double n = static_cast<double>(x.size(2) * x.size(3));
                const double mean_abs = x.to(at::kDouble).abs().mean({2, 3}).max().item<double>();
                double scale = 1e-12;
                for (const at::Tensor &t : want_t) scale = std::max(scale, t.abs().max().item<double>());
                const double fp32_bound = 2.0 * n * std::ldexp(mean_abs, -24) / scale + std::ldexp(1.0, -23);
                EXPECT_LE(testing::max_relative_error(got, want), dtype == at::kFloat ? fp32_bound : bf16_bound)
                    << c.name << " " << dtype << (channels_last ? " channels-last" : "") << "\n" << *frozen.graph;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Forms, ReplacePooling,
    ::testing::Values(
        PoolCase{"stem_max_pool", "    return torch.max_pool2d(x, 3, 2, 1)\n", 1, 0, 0},
        PoolCase{"ceil_max_pool", "    return torch.max_pool2d(x, [3, 3], [2, 2], [0, 0], [1, 1], True)\n", 1, 0, 0},
        PoolCase{"dilated_max_pool", "    return torch.max_pool2d(x, [3, 2], [1, 2], [1, 1], [2, 1])\n", 1, 0, 0},
        PoolCase{"global_pool", "    return torch.adaptive_avg_pool2d(x, [1, 1])\n", 0, 1, 0},
        PoolCase{"global_pool_pair",
                 "    y = torch.adaptive_avg_pool2d(x, [1, 1])\n"
                 "    return x * torch.sigmoid(y)\n",
                 0, 1, 0, 0, 0, 2},
        PoolCase{"adaptive_2x2_kept", "    return torch.adaptive_avg_pool2d(x, [2, 2])\n", 0, 0, 1},
        PoolCase{"both_in_a_head",
                 "    y = torch.max_pool2d(torch.relu(x), 2)\n"
                 "    z = torch.adaptive_avg_pool2d(y, [1, 1])\n"
                 "    return torch.flatten(z, 1), y\n",
                 1, 1, 0},
        PoolCase{"in_a_branch",
                 "    if bool(x.sum() > 0):\n"
                 "        return torch.max_pool2d(x, 3, 1, 1)\n"
                 "    return torch.adaptive_avg_pool2d(x, [1, 1])\n",
                 1, 1, 0},
        PoolCase{"model_means",
                 "    a = x.mean([2, 3], keepdim=True)\n"
                 "    b = torch.mean(x, [-1, -2])\n"
                 "    c = x.mean([3, -2])\n"
                 "    return a, b, c\n",
                 0, 0, 0, 3, 0},
        PoolCase{"other_means_kept",
                 "    a = x.mean([1])\n"
                 "    b = x.mean([1, 2, 3])\n"
                 "    c = x.mean([2, 3], dtype=7)  # float64\n"
                 "    d = x.mean([0, 3])\n"
                 "    return a, b, c, d\n",
                 0, 0, 0, 0, 4}),
    [](const ::testing::TestParamInfo<PoolCase> &info) { return info.param.name; });

}  // namespace
}  // namespace ipex::passes
