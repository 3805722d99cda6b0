// merge_embedding_bags with uint8 row-wise tables (optimize --embedding-int8) and over models that
// already call quantized::embedding_bag_byte_rowwise_offsets: op counts, the tables the merged op
// holds, the report's table bytes, and outputs within the stated bound (each pooled value within
// sum |w| * row range / 510 of fp32, plus fp32 rounding).
#include <gtest/gtest.h>

#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <string>
#include <vector>

#include "ir/graph_utils.h"
#include "ops/recsys/recsys_ops.h"
#include "pass_test_utils.h"
#include "passes/merge_embedding_bags.h"

namespace ipex::passes {
namespace {

constexpr double kFp32Tolerance = 1e-5;  // relative, fp32 rounding
constexpr int64_t kDim = 12, kIndices = 23;
const int64_t kRows[] = {10, 31, 7};
constexpr int64_t kRowwiseTailBytes = 8;  // a uint8 row's fp32 scale and bias

using Inputs = std::vector<c10::IValue>;

const c10::Symbol kMerged = c10::Symbol::fromQualString("ipex::merged_embedding_bag");

// Three tables: sum with per-sample weights, mean, sum with a padding row.
const char *kThreeBags =
    "def forward(self, i0, i1, i2, off, psw):\n"
    "    a, _0, _1, _2 = torch.embedding_bag(self.t0, i0, off, False, 0, False, psw, False, None)\n"
    "    b, _3, _4, _5 = torch.embedding_bag(self.t1, i1, off, False, 1, False, None, False, None)\n"
    "    c, _6, _7, _8 = torch.embedding_bag(self.t2, i2, off, False, 0, False, None, False, 3)\n"
    "    return a, b, c\n";

testing::Params three_tables() {
    testing::Params params;
    for (int t = 0; t < 3; ++t) params.push_back({"t" + std::to_string(t), at::randn({kRows[t], kDim}) * (t + 1) + t});
    return params;
}

Inputs three_bag_inputs() {
    Inputs x;
    for (int t = 0; t < 3; ++t) x.push_back(at::randint(0, kRows[t], {kIndices}, at::kLong));
    x[2].toTensor().slice(0, 0, 4).fill_(3);  // the padding row
    x.push_back(at::tensor({0, 5, 5, 12, 20}, at::kLong));  // an empty bag
    x.push_back(at::rand({kIndices}) * 2 - 1);              // negative weights too
    return x;
}

// The stated bound per output element: the calls' own pooling over each row's half step
// (range / 510), with |w| for the weights; the padding row is skipped as the call skips it.
std::vector<at::Tensor> stated_bound(const testing::Params &tables, const Inputs &x) {
    std::vector<at::Tensor> bound;
    const at::Tensor &off = x[3].toTensor();
    for (int t = 0; t < 3; ++t) {
        const at::Tensor &table = tables[t].second;
        const at::Tensor half_step = ((std::get<0>(table.max(1)) - std::get<0>(table.min(1))) / 510).unsqueeze(1);
        const c10::optional<at::Tensor> w = t == 0 ? c10::optional<at::Tensor>(x[4].toTensor().abs()) : c10::nullopt;
        const c10::optional<int64_t> padding = t == 2 ? c10::optional<int64_t>(3) : c10::nullopt;
        bound.push_back(std::get<0>(
            at::embedding_bag(half_step, x[t].toTensor(), off, false, t == 1 ? 1 : 0, false, w, false, padding)));
    }
    return bound;
}

class RecsysInt8Passes : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(RecsysInt8Passes, StoresTheTablesAsUint8RowsWithinTheStatedBound) {
    const testing::Params tables = three_tables();
    auto frozen = testing::freeze(testing::make_module("Bags", kThreeBags, tables));
    const auto original = frozen.graph->copy();
    const PassResult r = merge_embedding_bags(frozen.graph, {false, true});
    torch::jit::EliminateDeadCode(frozen.graph);
    // Sum and mean are two groups.
    EXPECT_EQ(r.count, 2) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::embedding_bag"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::merged_embedding_bag"), 2);
    int64_t before = 0, after = 0;
    for (int t = 0; t < 3; ++t) {
        before += kRows[t] * kDim * 4;
        after += kRows[t] * (kDim + kRowwiseTailBytes);
    }
    EXPECT_EQ(r.details["table_bytes_before"], before);
    EXPECT_EQ(r.details["table_bytes_after"], after);
    EXPECT_EQ(r.details["uint8_tables"], 3);
    for (const auto *node : frozen.graph->nodes()) {
        if (node->kind() != kMerged) continue;
        for (const auto *table : node->input(0)->node()->inputs())
            EXPECT_EQ(constant_tensor(table)->scalar_type(), at::kByte);
        EXPECT_TRUE(is_constant_none(node->input(7)));  // uint8 tables pool to fp32 by default
    }
    const Inputs x = three_bag_inputs();
    const auto want = testing::flatten_tensors(testing::run_graph(original, frozen.module, x));
    const auto got = testing::flatten_tensors(testing::run_graph(frozen.graph, frozen.module, x));
    const std::vector<at::Tensor> bound = stated_bound(tables, x);
    ASSERT_EQ(got.size(), 3u);
    for (int t = 0; t < 3; ++t) {
        EXPECT_EQ(got[t].scalar_type(), at::kFloat);
        const at::Tensor error = (got[t] - want[t]).abs();
        const at::Tensor slack = kFp32Tolerance * want[t].abs().max().clamp_min(1);
        EXPECT_TRUE(error.le(bound[t] + slack).all().item<bool>())
            << "table " << t << ": worst " << (error - bound[t]).max().item<double>();
        EXPECT_GT(error.max().item<double>(), 0) << "table " << t << " was not quantized";
    }
}

TEST_F(RecsysInt8Passes, QuantizesALoneTableAndBf16Tables) {
    const std::string source =
        "def forward(self, i, o):\n"
        "    a, _0, _1, _2 = torch.embedding_bag(self.t0, i, o, False, 0, False, None, False, None)\n"
        "    return a\n";
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor table = at::randn({9, 5}).to(dtype);
        auto frozen = testing::freeze(testing::make_module("Lone", source, {{"t0", table}}));
        const PassResult r = merge_embedding_bags(frozen.graph, {true, true});
        EXPECT_EQ(r.count, 1);
        EXPECT_EQ(r.details["uint8_tables"], 1);
        EXPECT_EQ(testing::count(frozen.graph, "aten::embedding_bag"), 0);
        const at::Tensor i = at::randint(0, 9, {8}, at::kLong), o = at::tensor({0, 3, 3}, at::kLong);
        const at::Tensor got = testing::run_graph(frozen.graph, frozen.module, {i, o}).toTensor();
        EXPECT_EQ(got.scalar_type(), dtype);  // the call's own dtype (libtorch 1.13 has no bf16 embedding_bag)
        const at::Tensor want = std::get<0>(at::embedding_bag(table.to(at::kFloat), i, o, false, 0));
        EXPECT_GE(testing::cosine_similarity(got.to(at::kFloat), want), 0.999);
    }
    // Without the option a lone table stays.
    auto frozen = testing::freeze(testing::make_module("Lone", source, {{"t0", at::randn({9, 5})}}));
    EXPECT_FALSE(merge_embedding_bags(frozen.graph, {true, false}).changed);
}

// Resolves `quantized.OP` in TorchScript source to the quantized:: ops (as Python's torch.ops
// does), the rest as the native resolver does.
struct QuantizedResolver : torch::jit::Resolver {
    std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string &name, torch::jit::GraphFunction &m,
                                                           const torch::jit::SourceRange &loc) override {
        if (name == "quantized") return std::make_shared<torch::jit::BuiltinModule>("quantized");
        return torch::jit::nativeResolver()->resolveValue(name, m, loc);
    }
    c10::TypePtr resolveType(const std::string &name, const torch::jit::SourceRange &loc) override {
        return torch::jit::nativeResolver()->resolveType(name, loc);
    }
};

torch::jit::Module quantized_module(const std::string &source, const testing::Params &params) {
    torch::jit::Module module("Byte");
    module.register_attribute("training", c10::BoolType::get(), true);
    for (const auto &[name, tensor] : params) module.register_parameter(name, tensor, false);
    module.define(source, std::make_shared<QuantizedResolver>());
    return module;
}

// A model that already calls aten's byte row-wise op over prepacked tables.
const char *kByteCalls =
    "def forward(self, i, o, psw):\n"
    "    a = quantized.embedding_bag_byte_rowwise_offsets(self.q0, i, o, False, 0, False, psw, None, False)\n"
    "    b = quantized.embedding_bag_byte_rowwise_offsets(self.q1, i, o, False, 0, False, None, None, False)\n"
    "    m = quantized.embedding_bag_byte_rowwise_offsets(self.q1, i, o, False, 1, False, None, None, False)\n"
    "    c, _0, _1, _2 = torch.embedding_bag(self.t2, i, o, False, 0, False, None, False, None)\n"
    "    return a, b, m, c\n";

TEST_F(RecsysInt8Passes, MergesAtensByteRowwiseCalls) {
    const testing::Params params{{"q0", ops::recsys::quantize_rows_uint8(at::randn({10, 6}))},
                                 {"q1", ops::recsys::quantize_rows_uint8(at::randn({12, 6}) * 5)},
                                 {"t2", at::randn({10, 6})}};
    const Inputs x{at::randint(0, 10, {14}, at::kLong), at::tensor({0, 4, 4, 9}, at::kLong), at::rand({14})};
    for (bool int8 : {false, true}) {
        SCOPED_TRACE(int8);
        auto frozen = testing::freeze(quantized_module(kByteCalls, params));
        const auto original = frozen.graph->copy();
        const PassResult r = merge_embedding_bags(frozen.graph, {false, int8});
        torch::jit::EliminateDeadCode(frozen.graph);
        EXPECT_EQ(r.count, 1) << *frozen.graph;
        // The mode-1 call stays (aten pools it as a sum); the fp32 table joins with int8 only.
        EXPECT_EQ(testing::count(frozen.graph, "quantized::embedding_bag_byte_rowwise_offsets"), 1);
        EXPECT_EQ(testing::count(frozen.graph, "aten::embedding_bag"), int8 ? 0 : 1);
        EXPECT_EQ(r.details["tables"], int8 ? 3 : 2);
        bool mode_one_named = false;
        for (const std::string &why : r.skipped) mode_one_named |= why.find("mode other than sum") != std::string::npos;
        EXPECT_TRUE(mode_one_named);
        const auto want = testing::flatten_tensors(testing::run_graph(original, frozen.module, x));
        const auto got = testing::flatten_tensors(testing::run_graph(frozen.graph, frozen.module, x));
        for (int k = 0; k < 3; ++k)
            EXPECT_LE(testing::max_relative_error(got[k], want[k]), kFp32Tolerance) << "output " << k;
        EXPECT_GE(testing::cosine_similarity(got[3], want[3]), 0.999);
    }
}

TEST_F(RecsysInt8Passes, LeavesByteCallsItCannotTake) {
    const std::string pruned =
        "def forward(self, i, o):\n"
        "    a = quantized.embedding_bag_byte_rowwise_offsets(self.q0, i, o, False, 0, True, None, None, False)\n"
        "    b = quantized.embedding_bag_byte_rowwise_offsets(self.q0, i, o, False, 0, False, None, None, False)\n"
        "    return a, b\n";
    auto frozen = testing::freeze(quantized_module(pruned, {{"q0", ops::recsys::quantize_rows_uint8(at::randn({6, 4}))}}));
    const PassResult r = merge_embedding_bags(frozen.graph, {false, true});
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(r.skipped.size(), 2u);  // the pruned call, and the other one alone
    EXPECT_EQ(testing::count(frozen.graph, "quantized::embedding_bag_byte_rowwise_offsets"), 2);
}

}  // namespace
}  // namespace ipex::passes
