// LinearContext against fp64 aten::linear: shapes (1-D to 4-D inputs, odd sizes), bias or
// none, fp32/bf32/bf16, contiguous and strided inputs, primitive cache bound, errors.
#include <gtest/gtest.h>

#include <tuple>

#include "ops/linear_context.h"
#include "ops/onednn_utils.h"
#include "unit/ops/ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using testing::expect_close;

struct LinearCase {
    std::string name;
    int64_t in, out;
    bool bias;
    std::vector<int64_t> leading;  // input dims before the feature dim
};

const std::vector<LinearCase> &cases() {
    static const std::vector<LinearCase> all = {
        {"vector", 7, 5, true, {}},
        {"rows1", 16, 33, true, {1}},
        {"rows3_nobias", 9, 4, false, {3}},
        {"batched3d", 31, 17, true, {3, 7}},
        {"batched4d_nobias", 8, 64, false, {2, 3, 5}},
        {"wide", 257, 129, true, {5}},
    };
    return all;
}

class OpsLinearGrid : public ::testing::TestWithParam<std::tuple<size_t, std::string>> {};

TEST_P(OpsLinearGrid, MatchesAtenReference) {
    at::manual_seed(2);
    const LinearCase &c = cases()[std::get<0>(GetParam())];
    const std::string dtype = std::get<1>(GetParam());
    // Every dtype runs: bf16/bf32 widened where oneDNN has no bf16 matmul (linear_context.h).
    const at::Tensor w = at::randn({c.out, c.in}) * 0.3;
    const at::Tensor b = c.bias ? at::randn({c.out}) : at::Tensor();
    LinearContext ctx(w, c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt, dtype, {}, 0);
    EXPECT_EQ(ctx.in_features(), c.in);
    EXPECT_EQ(ctx.out_features(), c.out);

    std::vector<int64_t> shape = c.leading;
    shape.push_back(c.in);
    const at::Tensor x = at::randn(shape);
    const at::Tensor want = testing::reference_linear(x, w, b);
    // Contiguous, then a non-contiguous view with the same values (every other column of a
    // wider tensor), then (for 2-D and up) a transposed-storage copy.
    std::vector<std::pair<std::string, at::Tensor>> inputs = {{"contiguous", x}};
    {
        std::vector<int64_t> wide = shape;
        wide.back() *= 2;
        at::Tensor view = at::randn(wide).slice(-1, 0, wide.back(), 2);
        view.copy_(x);
        inputs.push_back({"slice", view});
    }
    if (x.dim() >= 2) inputs.push_back({"transposed_storage", x.transpose(-1, -2).contiguous().transpose(-1, -2)});
    for (const auto &[layout, input] : inputs) {
        const std::string what = c.name + " " + dtype + " " + layout;
        const at::Tensor got = ctx.run(input, c10::nullopt);
        EXPECT_EQ(got.scalar_type(), testing::output_type(dtype)) << what;
        expect_close(got, want, dtype, what);
    }
}

std::string grid_name(const ::testing::TestParamInfo<OpsLinearGrid::ParamType> &info) {
    return cases()[std::get<0>(info.param)].name + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllCases, OpsLinearGrid,
                         ::testing::Combine(::testing::Range<size_t>(0, cases().size()),
                                            ::testing::Values("fp32", "bf32", "bf16")),
                         grid_name);

class OpsLinear : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(OpsLinear, Bf16InputOnBf16Context) {
    const at::Tensor w = (at::randn({12, 20}) * 0.3).to(at::kBFloat16), b = at::randn({12});
    LinearContext ctx(w, b, "bf16", {}, 4);
    const at::Tensor x = at::randn({4, 20}).to(at::kBFloat16);
    const at::Tensor got = ctx.run(x, c10::nullopt);
    EXPECT_EQ(got.scalar_type(), at::kBFloat16);
    expect_close(got, testing::reference_linear(x, w, b), "bf16", "bf16 input");
}

TEST_F(OpsLinear, NonContiguousWeight) {
    const at::Tensor w = (at::randn({20, 12}) * 0.3).t();
    ASSERT_FALSE(w.is_contiguous());
    LinearContext ctx(w, c10::nullopt, "fp32", {}, 0);
    const at::Tensor x = at::randn({3, 20});
    expect_close(ctx.run(x, c10::nullopt), testing::reference_linear(x, w, at::Tensor()), "fp32", "transposed weight");
}

TEST_F(OpsLinear, EmptyBatchGivesEmptyOutput) {
    LinearContext ctx(at::randn({6, 4}), c10::nullopt, "fp32", {}, 0);
    const at::Tensor got = ctx.run(at::randn({0, 4}), c10::nullopt);
    EXPECT_EQ(got.sizes(), (std::vector<int64_t>{0, 6}));
}

TEST_F(OpsLinear, PrimitiveCacheIsBounded) {
    const at::Tensor w = at::randn({10, 12}) * 0.3, b = at::randn({10});
    LinearContext ctx(w, b, "fp32", {{"gelu_erf"}}, 0);
    for (int round = 0; round < 2; ++round) {
        for (int64_t rows = 1; rows <= 20; ++rows) {
            const at::Tensor x = at::randn({rows, 12});
            expect_close(ctx.run(x, c10::nullopt), at::gelu(testing::reference_linear(x, w, b)), "fp32",
                         "rows " + std::to_string(rows));
            EXPECT_LE(ctx.cached_shapes(), LinearContext::kMaxPrimitives);
        }
    }
}

// 50 sequence lengths (2 x L rows each), in no order and twice over: every output right, one
// packed copy of the weight, primitives within the bound. Past the first RowBuckets::kExactRows
// row counts the inputs run padded on their bucket's primitive, the residual operand of a fused
// add too.
TEST_F(OpsLinear, FiftySequenceLengthsKeepOnePackedWeight) {
    at::manual_seed(5);
    const at::Tensor w = at::randn({48, 40}) * 0.2, b = at::randn({48});
    for (const std::string dtype : {"fp32", "bf16"}) {
        LinearContext plain(w, b, dtype, {{"relu"}}, 0);
        LinearContext residual(w, b, dtype, {{"add", 0, 0}}, 0);
        for (int round = 0; round < 2; ++round) {
            for (int64_t i = 1; i <= 50; ++i) {
                const int64_t length = (i * 37) % 211 + 1;
                const std::string what = dtype + " length " + std::to_string(length);
                const at::Tensor x = at::randn({2, length, 40});
                const at::Tensor r = at::randn({2, length, 48});
                const at::Tensor ref = testing::reference_linear(x, w, b);
                const at::Tensor got = plain.run(x, c10::nullopt);
                ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, length, 48})) << what;
                EXPECT_TRUE(got.is_contiguous()) << what;
                expect_close(got, ref.relu(), dtype, what);
                expect_close(residual.run(x, r), ref + r, dtype, what + " + residual");
            }
            EXPECT_EQ(plain.packed_layouts(), 1u) << dtype;
            EXPECT_EQ(residual.packed_layouts(), 1u) << dtype;
            EXPECT_LE(plain.cached_shapes(), LinearContext::kMaxPrimitives) << dtype;
            EXPECT_LE(residual.cached_shapes(), LinearContext::kMaxPrimitives) << dtype;
        }
    }
}

// Where oneDNN has no bf16 matmul, a bf16 (bf32) linear is the fp32 matmul of the bf16-rounded
// input and weight, post-ops in fp32, rounded to bf16 (fp32) once: bit for bit what an fp32
// context gives on the rounded values, at every row count, with a fused activation and a fused
// residual of either dtype; its result dtype is the dtype's.
TEST_F(OpsLinear, WidenedBf16IsTheFp32MatmulOfRoundedValues) {
    at::manual_seed(7);
    const at::Tensor w = at::randn({40, 72}) * 0.2, b = at::randn({40});
    const at::Tensor w16 = w.to(at::kBFloat16).to(at::kFloat);
    for (const std::string dtype : {"bf16", "bf32"}) {
        LinearContext relu(w, b, dtype, {{"relu"}}, 0);
        if (!relu.widened()) GTEST_SKIP() << "oneDNN has a bf16 matmul on this CPU: its native kernel runs";
        const at::ScalarType out = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
        LinearContext add(w, b, dtype, {{"add", 0, 0}}, 0);
        LinearContext relu32(w16, b, "fp32", {{"relu"}}, 0), add32(w16, b, "fp32", {{"add", 0, 0}}, 0);
        for (const int64_t rows : {1, 5, 64, 301}) {
            const std::string what = dtype + " rows " + std::to_string(rows);
            const at::Tensor x = at::randn({rows, 72});
            const at::Tensor x16 = x.to(at::kBFloat16).to(at::kFloat);
            const at::Tensor got = relu.run(x, c10::nullopt);
            EXPECT_EQ(got.scalar_type(), out) << what;
            EXPECT_TRUE(at::equal(got, relu32.run(x16, c10::nullopt).to(out))) << what;
            EXPECT_TRUE(at::equal(relu.run(x.to(at::kBFloat16), c10::nullopt), got)) << what << " bf16 input";
            for (const at::ScalarType rt : {at::kFloat, at::kBFloat16}) {
                const at::Tensor r = at::randn({rows, 40}).to(rt);
                const at::Tensor sum = add.run(x, r);
                EXPECT_EQ(sum.scalar_type(), at::promote_types(out, rt)) << what;
                EXPECT_TRUE(at::equal(sum, add32.run(x16, r.to(at::kFloat)).to(sum.scalar_type())))
                    << what << " + residual " << rt;
            }
        }
        // The state is the given weight and dtype: a CPU with bf16 kernels builds them from it.
        EXPECT_EQ(std::get<3>(relu.state()), dtype);
        EXPECT_TRUE(LinearContext::from_state(relu.state())->widened());
    }
}

// A weight adopted in place (the LLM runtime's one resident copy): the same outputs at every
// row count, with and without a fused residual, and no copy of the weight made, the caller's
// tensor being what oneDNN reads.
TEST_F(OpsLinear, WeightInPlaceMakesNoCopy) {
    at::manual_seed(6);
    for (const std::string dtype : {"fp32", "bf16"}) {
        if (!ipex::testing::onednn_runs(dtype)) continue;
        const at::Tensor w = (at::randn({96, 64}) * 0.2).to(dtype == "fp32" ? at::kFloat : at::kBFloat16);
        const at::Tensor b = at::randn({96});
        LinearContext in_place(w, b, dtype, {}, 1, /*weight_in_place=*/true);
        const auto with_add = in_place.with_post_ops({{"add", 0, 0}});
        for (const int64_t rows : {1, 3, 8, 17, 64, 300}) {
            const std::string what = dtype + " rows " + std::to_string(rows);
            const at::Tensor x = at::randn({rows, 64});
            const at::Tensor r = at::randn({rows, 96});
            const at::Tensor ref = testing::reference_linear(x, w.to(at::kFloat), b);
            expect_close(in_place.run(x, c10::nullopt), ref, dtype, what);
            expect_close(with_add->run(x, r), ref + r, dtype, what + " + residual");
        }
        EXPECT_EQ(in_place.packed_bytes(), 0) << dtype;
        EXPECT_EQ(with_add->packed_bytes(), 0) << dtype;
        // The default packs: a copy as large as the weight at least (oneDNN's layout, maybe padded).
        LinearContext packed(w, b, dtype, {}, 1);
        EXPECT_GE(packed.packed_bytes(), w.nbytes()) << dtype;
    }
}

// Row strides of a packed [in, out] weight: an odd number of 64-byte lines, or no change.
TEST(OddLineRows, PadsEvenLineCountsOnlyOfDenseRowMajor2D) {
    using dnnl::memory;
    const auto f32 = memory::data_type::f32, bf16 = memory::data_type::bf16;
    const auto stride_of = [](const memory::desc &d) { return d.data.format_desc.blocking.strides[0]; };
    const auto rows = [](int64_t k, int64_t n, memory::data_type t) {
        return memory::desc({k, n}, t, memory::format_tag::ab);
    };
    EXPECT_EQ(stride_of(odd_line_rows(rows(12544, 1024, f32))), 1040);  // 64 lines -> 65
    EXPECT_EQ(stride_of(odd_line_rows(rows(7, 91, f32))), 112);         // 6 lines (96) -> 7
    EXPECT_EQ(stride_of(odd_line_rows(rows(7, 1000, f32))), 1008);      // 63 lines, padded up to them
    EXPECT_EQ(stride_of(odd_line_rows(rows(7, 32, f32))), 48);
    EXPECT_EQ(stride_of(odd_line_rows(rows(7, 1024, bf16))), 1056);     // 32 per line: 32 lines -> 33
    const memory::desc zero;
    EXPECT_EQ(odd_line_rows(rows(7, 48, f32)), zero);                    // 3 whole lines already
    EXPECT_EQ(odd_line_rows(rows(7, 16, f32)), zero);
    EXPECT_EQ(odd_line_rows(rows(1, 1024, f32)), zero);                  // one row: nothing to spread
    EXPECT_EQ(odd_line_rows(memory::desc({7, 1024}, f32, memory::format_tag::ba)), zero);
    EXPECT_EQ(odd_line_rows(memory::desc({7, 1024}, f32, memory::format_tag::any)), zero);
    EXPECT_EQ(odd_line_rows(memory::desc({2, 7, 1024}, f32, memory::format_tag::abc)), zero);
    EXPECT_EQ(odd_line_rows(memory::desc({7, 1024}, f32, memory::dims{2048, 1})), zero);  // already strided
}

// Outputs a power of two wide (the weight rows oneDNN's gemm-based matmul thrashes the cache
// sets with) at odd input widths and row counts: right against fp64, one packed copy whatever
// the row count, and on CPUs where the matmul is gemm-based that copy has padded rows.
TEST_F(OpsLinear, PowerOfTwoOutputsPackPaddedRows) {
    at::manual_seed(7);
    for (const int64_t out : {int64_t{512}, int64_t{1024}}) {
        for (const int64_t in : {int64_t{301}, int64_t{1}}) {
            const std::string what = std::to_string(in) + "->" + std::to_string(out);
            const at::Tensor w = at::randn({out, in}) * 0.1, b = at::randn({out});
            LinearContext ctx(w, b, "fp32", {}, 0);
            for (const int64_t rows : {1, 2, 7, 150, 1}) {
                const at::Tensor x = at::randn({rows, in});
                expect_close(ctx.run(x, c10::nullopt), testing::reference_linear(x, w, b), "fp32",
                             what + " rows " + std::to_string(rows));
            }
            EXPECT_EQ(ctx.packed_layouts(), 1u) << what;
            // What oneDNN picks for this shape on this CPU with the weight layout left to it.
            using dnnl::memory;
            const memory::desc any({in, out}, memory::data_type::f32, memory::format_tag::any);
            const dnnl::matmul::primitive_desc pd(
                dnnl::matmul::desc(memory::desc({150, in}, memory::data_type::f32, memory::format_tag::ab), any,
                                   memory::desc({150, out}, memory::data_type::f32, memory::format_tag::ab)),
                cpu_engine());
            const std::string impl = pd.impl_info_str();
            if (impl.rfind("gemm", 0) == 0 && in > 1)
                EXPECT_EQ(ctx.packed_bytes(), in * (out + 16) * 4) << what << " on " << impl;
            else
                EXPECT_GE(ctx.packed_bytes(), w.nbytes()) << what << " on " << impl;
        }
    }
}

TEST(RowBuckets, ExactFirstThenBucketsOfAtMostAnEighthMore) {
    RowBuckets buckets;
    for (int64_t rows = 100; rows < 100 + static_cast<int64_t>(RowBuckets::kExactRows); ++rows)
        EXPECT_EQ(buckets.rows_to_build(rows), rows);
    EXPECT_EQ(buckets.rows_to_build(103), 103) << "a count with its own primitive keeps it";
    EXPECT_EQ(buckets.rows_to_build(7), 7) << "small counts are their own bucket";
    EXPECT_EQ(buckets.rows_to_build(1000), RowBuckets::bucket(1000));
    int64_t distinct = 0, last = 0;
    for (int64_t rows = 1; rows <= 4096; ++rows) {
        const int64_t b = RowBuckets::bucket(rows);
        EXPECT_GE(b, rows);
        EXPECT_LE(b * 8, rows * 9 + 8 * 16) << rows;  // at most 1/8 more (exact up to 16)
        EXPECT_EQ(RowBuckets::bucket(b), b) << "a bucket is its own bucket";
        if (b != last) ++distinct;
        last = b;
    }
    // 16 exact counts, then 8 per doubling from 16 to 4096.
    EXPECT_EQ(distinct, 16 + 8 * 8);
    EXPECT_EQ(RowBuckets::bucket(1024), 1024);
    EXPECT_EQ(RowBuckets::bucket(394), 416);
}

TEST_F(OpsLinear, RejectsWrongFeatureCount) {
    LinearContext ctx(at::randn({6, 4}), c10::nullopt, "fp32", {}, 0);
    const std::string msg = testing::error_of([&] { ctx.run(at::randn({3, 5}), c10::nullopt); });
    EXPECT_NE(msg.find("expected an input with 4 features"), std::string::npos) << msg;
    const std::string scalar = testing::error_of([&] { ctx.run(at::randn({}), c10::nullopt); });
    EXPECT_NE(scalar.find("4 features"), std::string::npos) << scalar;
    const std::string integer = testing::error_of([&] { ctx.run(at::ones({3, 4}, at::kLong), c10::nullopt); });
    EXPECT_NE(integer.find("floating-point input"), std::string::npos) << integer;
}

TEST_F(OpsLinear, RejectsBadConstruction) {
    const auto make = [](at::Tensor w, c10::optional<at::Tensor> b, PostOps ops = {}) {
        return testing::error_of([&] { LinearContext(w, b, "fp32", ops, 0); });
    };
    EXPECT_NE(make(at::randn({2, 3, 4}), c10::nullopt).find("2-D"), std::string::npos);
    EXPECT_NE(make(at::randn({6, 4}), at::randn({4})).find("does not match 6 output features"), std::string::npos);
    EXPECT_NE(make(at::randn({6, 4}), c10::nullopt, {{"sum", 1.0}}).find("add post-op rather than sum"),
              std::string::npos);
    EXPECT_NE(make(at::randn({6, 4}), c10::nullopt, {{"add"}, {"mul"}}).find("at most one"), std::string::npos);
    EXPECT_NE(make(at::randn({6, 4}), c10::nullopt, {{"swish7"}}).find("unknown post-op 'swish7'"), std::string::npos);
}

TEST_F(OpsLinear, BinaryContextNeedsOtherTensor) {
    LinearContext ctx(at::randn({6, 4}), c10::nullopt, "fp32", {{"add"}}, 0);
    const std::string msg = testing::error_of([&] { ctx.run(at::randn({3, 4}), c10::nullopt); });
    EXPECT_NE(msg.find("needs a second tensor"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ipex::ops
