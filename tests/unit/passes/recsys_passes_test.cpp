// merge_embedding_bags and fuse_interaction on DLRM-style TorchScript: op counts before and
// after, outputs against the unmodified graph (fp32 to 1e-5), and the cases left alone side by
// side (max pooling, a read offset2bag output, one table, a dense vector that is not the first
// feature, a product of two different tensors).
#include <gtest/gtest.h>

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <string>
#include <vector>

#include "ir/graph_utils.h"
#include "pass_test_utils.h"
#include "passes/fuse_interaction.h"
#include "passes/merge_embedding_bags.h"

namespace ipex::passes {
namespace {

constexpr double kRecsysTolerance = 1e-5;  // relative, fp32
constexpr int64_t kBatch = 5, kDim = 8;
const int64_t kRows[] = {10, 20, 7};

using Inputs = std::vector<c10::IValue>;

// A bottom "MLP" of one linear, three tables (the second with per-sample weights, the third
// with a padding row) pooled by `mode`, and DLRM's interaction as `interaction` spells it.
std::string dlrm_source(const std::string &mode, const std::string &interaction) {
    return "def forward(self, dense, idx: List[Tensor], off: List[Tensor], psw):\n"
           "    x = torch.relu(torch.linear(dense, self.bottom_w, self.bottom_b))\n"
           "    ly: List[Tensor] = []\n"
           "    e0, a0, b0, c0 = torch.embedding_bag(self.t0, idx[0], off[0], False, " +
           mode +
           ", False, None, False, None)\n"
           "    ly.append(e0)\n"
           "    e1, a1, b1, c1 = torch.embedding_bag(self.t1, idx[1], off[1], False, " +
           mode + ", False, " + (mode == "0" ? "psw" : "None") +
           ", False, None)\n"
           "    ly.append(e1)\n"
           "    e2, a2, b2, c2 = torch.embedding_bag(self.t2, idx[2], off[2], False, " +
           mode +
           ", False, None, False, -2)\n"
           "    ly.append(e2)\n" +
           interaction;
}

const char *kViewAndConstantPairs =
    "    b, d = x.shape\n"
    "    T = torch.cat([x] + ly, dim=1).view((b, -1, d))\n"
    "    Z = torch.bmm(T, torch.transpose(T, 1, 2))\n"
    "    return torch.cat([x] + [Z[:, self.li, self.lj]], dim=1)\n";

const char *kStackAndTril =
    "    T = torch.stack([x] + ly, dim=1)\n"
    "    Z = torch.bmm(T, T.transpose(-1, -2))\n"
    "    t = torch.tril_indices(Z.shape[1], Z.shape[2], offset=-1)\n"
    "    return torch.cat([x, Z[:, t[0], t[1]]], dim=1)\n";

const char *kPermuteAndUnpackedSizes =
    "    T = torch.stack([x, ly[0], ly[1], ly[2]], dim=1)\n"
    "    Z = torch.matmul(T, T.permute(0, 2, 1))\n"
    "    _, ni, nj = Z.shape\n"
    "    t = torch.tril_indices(ni, nj, -1)\n"
    "    return torch.cat([x, Z[:, t[0], t[1]]], 1)\n";

const char *kStackAndIndexTensors =
    "    T = torch.stack([x] + ly, dim=1)\n"
    "    Z = torch.bmm(T, T.transpose(1, 2))\n"
    "    return torch.cat([x, Z[:, self.li, self.lj]], dim=1)\n";

// One dot product a pair, as a Python loop unrolled: not fused (named in skipped).
const char *kDotPerPair =
    "    t = [x] + ly\n"
    "    d = torch.stack([(t[1] * t[0]).sum(1), (t[2] * t[0]).sum(1), (t[2] * t[1]).sum(1), (t[3] * t[0]).sum(1),\n"
    "                     (t[3] * t[1]).sum(1), (t[3] * t[2]).sum(1)], dim=1)\n"
    "    return torch.cat([x, d], dim=1)\n";

torch::jit::Module dlrm(const std::string &mode, const std::string &interaction) {
    const at::Tensor pairs = at::tril_indices(4, 4, -1);
    testing::Params params{{"bottom_w", at::randn({kDim, 5})},
                           {"bottom_b", at::randn({kDim})},
                           {"li", pairs[0].clone()},
                           {"lj", pairs[1].clone()}};
    for (int t = 0; t < 3; ++t) params.push_back({"t" + std::to_string(t), at::randn({kRows[t], kDim})});
    return testing::make_module("Dlrm", dlrm_source(mode, interaction), params);
}

// Indices and offsets with an empty bag and padding rows; per-sample weights for table 1.
Inputs dlrm_inputs() {
    c10::List<at::Tensor> idx, off;
    for (int t = 0; t < 3; ++t) {
        idx.push_back(at::randint(0, kRows[t], {11}, at::kLong));
        off.push_back(at::tensor({0, 2, 2, 6, 9}, at::kLong));
    }
    idx.get(2)[0] = kRows[2] - 2;  // the padding row
    return {at::randn({kBatch, 5}), idx, off, at::rand({11})};
}

class RecsysPasses : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }

    // Runs both passes; checks the counts they report and the outputs against the original.
    void expect_fused(const torch::jit::Module &model, int merged, int interactions, bool bf16_tables = false) {
        auto frozen = testing::freeze(model);
        const auto original = frozen.graph->copy();
        const int bags = testing::count(frozen.graph, "aten::embedding_bag");
        const PassResult m = merge_embedding_bags(frozen.graph, {bf16_tables, false});
        const PassResult f = fuse_interaction(frozen.graph);
        torch::jit::EliminateDeadCode(frozen.graph);
        EXPECT_EQ(m.count, merged) << *frozen.graph;
        EXPECT_EQ(f.count, interactions) << *frozen.graph;
        EXPECT_EQ(testing::count(frozen.graph, "ipex::merged_embedding_bag"), merged);
        EXPECT_EQ(testing::count(frozen.graph, "ipex::interaction"), interactions);
        if (merged) EXPECT_EQ(testing::count(frozen.graph, "aten::embedding_bag"), bags - 3);
        if (interactions)
            EXPECT_EQ(testing::count(frozen.graph, "aten::bmm") + testing::count(frozen.graph, "aten::matmul"), 0);
        const Inputs x = dlrm_inputs();
        const auto want = testing::run_graph(original, frozen.module, x);
        const auto got = testing::run_graph(frozen.graph, frozen.module, x);
        if (bf16_tables) {
            EXPECT_GE(testing::cosine_similarity(got, want), testing::kLowpMinCosine);
        } else {
            EXPECT_LE(testing::max_relative_error(got, want), kRecsysTolerance);
        }
    }
};

TEST_F(RecsysPasses, MergesTheTablesAndFusesTheInteraction) {
    for (const char *mode : {"0", "1"}) {
        SCOPED_TRACE(mode);
        expect_fused(dlrm(mode, kViewAndConstantPairs), 1, 1);
        expect_fused(dlrm(mode, kStackAndTril), 1, 1);
        expect_fused(dlrm(mode, kPermuteAndUnpackedSizes), 1, 1);
        expect_fused(dlrm(mode, kStackAndIndexTensors), 1, 1);
    }
}

TEST_F(RecsysPasses, NamesTheDotPerPairFormItLeaves) {
    auto frozen = testing::freeze(dlrm("0", kDotPerPair));
    const PassResult r = fuse_interaction(frozen.graph);
    EXPECT_FALSE(r.changed);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped[0].find("one dot product a pair"), std::string::npos) << r.skipped[0];
    expect_fused(dlrm("0", kDotPerPair), 1, 0);  // the tables still merge
}

TEST_F(RecsysPasses, Bf16TablesReturnFp32) {
    auto frozen = testing::freeze(dlrm("0", kViewAndConstantPairs));
    const auto original = frozen.graph->copy();
    ASSERT_EQ(merge_embedding_bags(frozen.graph, {true, false}).count, 1);
    for (const auto *node : frozen.graph->nodes())
        if (node->kind() == c10::Symbol::fromQualString("ipex::merged_embedding_bag"))
            for (const auto *table : node->input(0)->node()->inputs())
                EXPECT_EQ(constant_tensor(table)->scalar_type(), at::kBFloat16);
    const Inputs x = dlrm_inputs();
    const auto got = testing::run_graph(frozen.graph, frozen.module, x);
    EXPECT_EQ(got.toTensor().scalar_type(), at::kFloat);
    EXPECT_GE(testing::cosine_similarity(got, testing::run_graph(original, frozen.module, x)), testing::kLowpMinCosine);
}

TEST_F(RecsysPasses, GroupsByModeAndLeavesMaxPooling) {
    const std::string source =
        "def forward(self, i, o):\n"
        "    s0, _0, _1, _2 = torch.embedding_bag(self.t0, i, o, False, 0, False, None, False, None)\n"
        "    m0, _3, _4, _5 = torch.embedding_bag(self.t1, i, o, False, 1, False, None, False, None)\n"
        "    s1, _6, _7, _8 = torch.embedding_bag(self.t1, i, o, False, 0, False, None, False, None)\n"
        "    m1, _9, _a, _b = torch.embedding_bag(self.t0, i, o, False, 1, False, None, False, None)\n"
        "    x0, _c, _d, _e = torch.embedding_bag(self.t0, i, o, False, 2, False, None, False, None)\n"
        "    return s0 + m0 + s1 + m1 + x0\n";
    auto frozen =
        testing::freeze(testing::make_module("Modes", source, {{"t0", at::randn({6, 4})}, {"t1", at::randn({6, 4})}}));
    const auto original = frozen.graph->copy();
    const PassResult r = merge_embedding_bags(frozen.graph, {});
    EXPECT_EQ(r.count, 2);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::merged_embedding_bag"), 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::embedding_bag"), 1);  // max pooling stays
    const Inputs x{at::randint(0, 6, {7}, at::kLong), at::tensor({0, 3, 3}, at::kLong)};
    EXPECT_LE(testing::max_relative_error(testing::run_graph(frozen.graph, frozen.module, x),
                                          testing::run_graph(original, frozen.module, x)),
              kRecsysTolerance);
}

// With bf16 tables, a table two calls read is converted once.
TEST_F(RecsysPasses, Bf16ConvertsASharedTableOnce) {
    const std::string source =
        "def forward(self, i, o):\n"
        "    a, _0, _1, _2 = torch.embedding_bag(self.t0, i, o, False, 0, False, None, False, None)\n"
        "    b, _3, _4, _5 = torch.embedding_bag(self.t0, o, o, False, 0, False, None, False, None)\n"
        "    c, _6, _7, _8 = torch.embedding_bag(self.t1, i, o, False, 0, False, None, False, None)\n"
        "    return a + b + c\n";
    auto frozen =
        testing::freeze(testing::make_module("Shared", source, {{"t0", at::randn({6, 4})}, {"t1", at::randn({6, 4})}}));
    ASSERT_EQ(merge_embedding_bags(frozen.graph, {true, false}).count, 1);
    int merged = 0;
    for (const auto *node : frozen.graph->nodes()) {
        if (node->kind() != c10::Symbol::fromQualString("ipex::merged_embedding_bag")) continue;
        ++merged;
        const auto tables = node->input(0)->node()->inputs();
        ASSERT_EQ(tables.size(), 3u);
        EXPECT_EQ(tables[0], tables[1]);
        EXPECT_NE(tables[0], tables[2]);
    }
    EXPECT_EQ(merged, 1);
}

TEST_F(RecsysPasses, LeavesCallsWhoseOtherOutputsAreReadOrAlone) {
    const std::string read_bag_size =
        "def forward(self, i, o):\n"
        "    s0, _0, n0, _2 = torch.embedding_bag(self.t0, i, o, False, 0, False, None, False, None)\n"
        "    s1, _3, _4, _5 = torch.embedding_bag(self.t1, i, o, False, 0, False, None, False, None)\n"
        "    return s0 + s1, n0\n";
    const std::string alone =
        "def forward(self, i, o):\n"
        "    s0, _0, _1, _2 = torch.embedding_bag(self.t0, i, o, False, 0, False, None, False, None)\n"
        "    return s0\n";
    for (const std::string &source : {read_bag_size, alone}) {
        auto frozen = testing::freeze(
            testing::make_module("Kept", source, {{"t0", at::randn({6, 4})}, {"t1", at::randn({6, 4})}}));
        const int before = testing::count(frozen.graph, "aten::embedding_bag");
        const PassResult r = merge_embedding_bags(frozen.graph, {});
        EXPECT_FALSE(r.changed);
        EXPECT_FALSE(r.skipped.empty());
        EXPECT_EQ(testing::count(frozen.graph, "aten::embedding_bag"), before);
    }
}

// What cast_to_lowp leaves in a bf16 model: the tables' fp32 outputs promote T to fp32, which is
// cast back to bf16 for the bmm (on T and on its transpose).
TEST_F(RecsysPasses, FusesTheInteractionOfABf16Model) {
    const std::string source =
        "def forward(self, dense, e1, e2):  # 15: torch.bfloat16\n"
        "    x = dense.to(15)\n"
        "    T = torch.stack([x, e1, e2], dim=1)\n"
        "    Z = torch.bmm(T.to(15), T.transpose(1, 2).to(15))\n"
        "    return torch.cat([x, Z[:, self.li, self.lj]], dim=1)\n";
    const at::Tensor pairs = at::tril_indices(3, 3, -1);
    auto frozen = testing::freeze(
        testing::make_module("Bf16Interaction", source, {{"li", pairs[0].clone()}, {"lj", pairs[1].clone()}}));
    const auto original = frozen.graph->copy();
    EXPECT_EQ(fuse_interaction(frozen.graph).count, 1);
    torch::jit::EliminateDeadCode(frozen.graph);
    EXPECT_EQ(testing::count(frozen.graph, "aten::bmm"), 0);
    const Inputs x{at::randn({4, 32}), at::randn({4, 32}), at::randn({4, 32})};
    const auto got = testing::run_graph(frozen.graph, frozen.module, x);
    EXPECT_EQ(got.toTensor().scalar_type(), at::kBFloat16);
    EXPECT_GE(testing::cosine_similarity(got, testing::run_graph(original, frozen.module, x)), testing::kLowpMinCosine);
}

TEST_F(RecsysPasses, LeavesInteractionsOfOtherShapes) {
    const std::string other_dense =
        "def forward(self, x, y, e):\n"
        "    T = torch.stack([x, e], dim=1)\n"
        "    Z = torch.bmm(T, T.transpose(1, 2))\n"
        "    return torch.cat([y, Z[:, self.li, self.lj]], dim=1)\n";
    const std::string two_tensors =
        "def forward(self, x, y, e):\n"
        "    T = torch.stack([x, e], dim=1)\n"
        "    U = torch.stack([y, e], dim=1)\n"
        "    Z = torch.bmm(T, U.transpose(1, 2))\n"
        "    return torch.cat([x, Z[:, self.li, self.lj]], dim=1)\n";
    for (const std::string &source : {other_dense, two_tensors}) {
        auto frozen = testing::freeze(testing::make_module(
            "Kept", source, {{"li", at::tensor({1}, at::kLong)}, {"lj", at::tensor({0}, at::kLong)}}));
        const PassResult r = fuse_interaction(frozen.graph);
        EXPECT_FALSE(r.changed);
        EXPECT_EQ(r.skipped.size(), 1u);
        EXPECT_EQ(testing::count(frozen.graph, "aten::bmm"), 1);
    }
}

}  // namespace
}  // namespace ipex::passes
