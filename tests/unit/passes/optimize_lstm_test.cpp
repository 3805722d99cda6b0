// optimize_lstm on frozen scripted modules calling torch.lstm / torch.gru: op counts before
// and after, outputs against the unmodified graph (fp32 and bf16), and the forms left as aten
// with their reason (training dropout, packed sequences, proj_size, non-constant weights).
#include <gtest/gtest.h>

#include <string>

#include "pass_test_utils.h"
#include "passes/optimize_lstm.h"
#include "unit/test_cpu.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

constexpr int64_t kIn = 6, kHidden = 8, kProj = 3;

testing::Params rnn_params() {
    const auto w = [](std::vector<int64_t> sizes) { return at::randn(sizes) * 0.3; };
    return {{"w_ih", w({4 * kHidden, kIn})},    {"w_hh", w({4 * kHidden, kHidden})}, {"b_ih", w({4 * kHidden})},
            {"b_hh", w({4 * kHidden})},         {"g_ih", w({3 * kHidden, kHidden})}, {"g_hh", w({3 * kHidden, kHidden})},
            {"p_hh", w({4 * kHidden, kProj})}, {"w_hr", w({kProj, kHidden})}};
}

const char *kLstmWeights = "[self.w_ih, self.w_hh, self.b_ih, self.b_hh]";

class OptimizeLstm : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(3); }
};

TEST_F(OptimizeLstm, ReplacesLstmAndGruWithConstantWeights) {
    auto module = testing::make_module(
        "Rnns",
        std::string("def forward(self, x, h, c):\n"
                    "    y, hn, cn = torch.lstm(x, [h, c], ") + kLstmWeights + ", True, 1, 0.0, False, False, False)\n"
        "    z, gn = torch.gru(y, hn, [self.g_ih, self.g_hh], False, 1, 0.0, False, False, False)\n"
        "    return z, gn, cn\n",
        rnn_params());
    const auto frozen = testing::freeze(module);
    EXPECT_EQ(testing::count(frozen.graph, "aten::lstm"), 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::gru"), 1);
    const std::vector<c10::IValue> inputs = {at::randn({5, 3, kIn}), at::randn({1, 3, kHidden}),
                                             at::randn({1, 3, kHidden})};
    const auto want = testing::run_graph(frozen.graph, frozen.module, inputs);
    for (const std::string dtype : {"fp32", "bf16"}) {
        GraphPtr graph = frozen.graph->copy();
        const PassResult r = optimize_lstm(graph, dtype);
        graph->lint();
        if (const std::string lacks = ipex::testing::onednn_lacks(dtype); !lacks.empty()) {
            // No oneDNN RNN of this dtype here: both layers stay aten, each named with its reason.
            EXPECT_FALSE(r.changed) << lacks;
            EXPECT_EQ(r.skipped.size(), 2u) << lacks;
            EXPECT_EQ(testing::count(graph, "aten::lstm") + testing::count(graph, "aten::gru"), 2) << *graph;
            continue;
        }
        EXPECT_TRUE(r.changed);
        EXPECT_EQ(r.count, 2);
        EXPECT_EQ(r.modules.size(), 2u);
        EXPECT_TRUE(r.skipped.empty());
        EXPECT_EQ(testing::count(graph, "aten::lstm") + testing::count(graph, "aten::gru"), 0) << *graph;
        EXPECT_EQ(testing::count(graph, "ipex::lstm"), 1);
        EXPECT_EQ(testing::count(graph, "ipex::gru"), 1);
        const auto got = testing::run_graph(graph, frozen.module, inputs);
        if (dtype == "fp32")
            EXPECT_LE(testing::max_relative_error(got, want), 1e-5);
        else
            EXPECT_GE(testing::cosine_similarity(got, want), testing::kLowpMinCosine);
    }
}

TEST_F(OptimizeLstm, LeavesUnsupportedFormsWithTheirReason) {
    auto module = testing::make_module(
        "Unsupported",
        std::string("def forward(self, x, h, c, data, sizes, hp, w):\n"
                    "    a = torch.lstm(x, [h, c], ") + kLstmWeights + ", True, 1, 0.5, True, False, False)[0]\n"
        "    b = torch.lstm(data, sizes, [h, c], " + kLstmWeights + ", True, 1, 0.0, False, False)[0]\n"
        "    p = torch.lstm(x, [hp, c], [self.w_ih, self.p_hh, self.b_ih, self.b_hh, self.w_hr], True, 1, 0.0,\n"
        "                   False, False, False)[0]\n"
        "    q = torch.lstm(x, [h, c], [w, self.w_hh, self.b_ih, self.b_hh], True, 1, 0.0, False, False, False)[0]\n"
        "    return a, b, p, q\n",
        rnn_params());
    auto frozen = testing::freeze(module);
    EXPECT_EQ(testing::count(frozen.graph, "aten::lstm"), 4);
    const PassResult r = optimize_lstm(frozen.graph, "fp32");
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(r.count, 0);
    EXPECT_EQ(testing::count(frozen.graph, "aten::lstm"), 4);
    ASSERT_EQ(r.skipped.size(), 4u);
    std::string all;
    for (const auto &s : r.skipped) all += s + "\n";
    for (const char *reason : {"dropout in training", "packed sequence", "proj_size", "not constants"})
        EXPECT_NE(all.find(reason), std::string::npos) << reason << " missing from:\n" << all;
    EXPECT_NE(all.find("aten::lstm kept"), std::string::npos) << all;
}

}  // namespace
}  // namespace ipex::passes
