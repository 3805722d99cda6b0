// The recommendation ops: merged_embedding_bag against aten::embedding_bag table by table over
// odd cases (empty bags, an empty batch, per_sample_weights, padding_idx, mean and sum,
// include_last_offset, int32 and int64 indices, bf16 tables), interaction against the formula
// on aten's ops (stacked and viewed features, given pairs and tril_indices, odd widths), its
// portable and AVX-512 builds against each other (to the bit), and the input errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "base/isa.h"
#include "recsys_test_utils.h"
#include "ops/recsys/embedding_bag_kernel.h"
#include "ops/recsys/interaction_kernel.h"
#include "ops/recsys/recsys_ops.h"

namespace ipex::ops::recsys {
namespace {

using namespace testing_recsys;

TEST_F(Recsys, MergedEmbeddingBagMatchesAtenTableByTable) {
    for (int64_t mode : {0, 1}) {
        for (bool last : {false, true}) {
            for (at::ScalarType index : {at::kLong, at::kInt}) {
                std::vector<Case> cases{make_case(11, 8, 7, index, last, mode == 0, -1),
                                        make_case(3, 5, 7, index, last, false, 2),
                                        make_case(40, 17, 3, index, last, mode == 0, 0),
                                        make_case(6, 1, 0, index, last, false, -1)};  // an empty batch
                const std::vector<at::Tensor> got = merged(cases, mode, last);
                ASSERT_EQ(got.size(), cases.size());
                for (size_t t = 0; t < cases.size(); ++t) {
                    const at::Tensor want = aten_bag(cases[t], mode, last);
                    ASSERT_EQ(got[t].sizes(), want.sizes()) << "table " << t;
                    EXPECT_LE(relative_error(got[t], want), kFp32Tolerance)
                        << "mode " << mode << " last " << last << " table " << t;
                }
            }
        }
    }
}

// Outputs past kStreamOutputBytes are written with non-temporal stores where a row starts 16-byte
// aligned (dim 128) and by a plain copy where it does not (dim 3: every other row).
TEST_F(Recsys, MergedEmbeddingBagLargeOutputs) {
    for (int64_t mode : {0, 1}) {
        std::vector<Case> cases{make_case(1000, 128, 18000, at::kLong, true, mode == 0, -1),
                                make_case(500, 3, 90001, at::kInt, true, false, 4)};
        const std::vector<at::Tensor> got = merged(cases, mode, true);
        ASSERT_GT(got[0].nbytes() + got[1].nbytes(), static_cast<size_t>(kStreamOutputBytes));
        for (size_t t = 0; t < cases.size(); ++t) {
            const at::Tensor want = aten_bag(cases[t], mode, true);
            ASSERT_EQ(got[t].sizes(), want.sizes()) << "table " << t;
            EXPECT_LE(relative_error(got[t], want), kFp32Tolerance) << "mode " << mode << " table " << t;
        }
    }
}

TEST_F(Recsys, MergedEmbeddingBagBf16Tables) {
    std::vector<Case> cases{make_case(30, 33, 9, at::kLong, false, true, -1),
                            make_case(8, 4, 5, at::kLong, false, false, 1)};
    const std::vector<at::Tensor> got = merged(cases, 0, false, c10::nullopt, at::kBFloat16);
    const std::vector<at::Tensor> as_fp32 = merged(cases, 0, false, at::kFloat, at::kBFloat16);
    for (size_t t = 0; t < cases.size(); ++t) {
        Case rounded = cases[t];
        rounded.weight = cases[t].weight.to(at::kBFloat16).to(at::kFloat);
        const at::Tensor want = aten_bag(rounded, 0, false);
        EXPECT_EQ(got[t].scalar_type(), at::kBFloat16);
        EXPECT_EQ(as_fp32[t].scalar_type(), at::kFloat);
        EXPECT_LE(relative_error(got[t], want), kBf16Tolerance) << t;
        EXPECT_LE(relative_error(as_fp32[t], want), kFp32Tolerance) << t;  // fp32 sums of the bf16 rows
    }
}

TEST_F(Recsys, MergedEmbeddingBagRefusesCraftedArguments) {
    Case c = make_case(10, 4, 4, at::kLong, false, false, -1);
    const auto with = [&](Case changed, int64_t mode) { return [=] { merged({changed}, mode, false); }; };
    Case decreasing = c;
    decreasing.indices = at::arange(6, at::kLong);
    decreasing.offsets = at::tensor({0, 4, 2, 6}, at::kLong);
    expect_input_error(with(decreasing, 0), "merged_embedding_bag", "must not decrease");
    Case outside = c;
    outside.indices = at::tensor({1, 10, 2}, at::kLong);
    outside.offsets = at::tensor({0, 1}, at::kLong);
    expect_input_error(with(outside, 0), "merged_embedding_bag", "index 10");
    Case negative = outside;
    negative.indices = at::tensor({1, -1, 2}, at::kLong);
    expect_input_error(with(negative, 0), "merged_embedding_bag", "index -1");
    Case late_start = outside;
    late_start.indices = at::tensor({1, 2, 3}, at::kLong);
    late_start.offsets = at::tensor({1, 2}, at::kLong);
    expect_input_error(with(late_start, 0), "merged_embedding_bag", "offsets[0] must be 0");
    Case past_end = late_start;
    past_end.offsets = at::tensor({0, 4}, at::kLong);
    expect_input_error(with(past_end, 0), "merged_embedding_bag", "past the 3 indices");
    Case weighted_mean = late_start;
    weighted_mean.offsets = at::tensor({0, 2}, at::kLong);
    weighted_mean.psw = at::ones({3});
    expect_input_error(with(weighted_mean, 1), "merged_embedding_bag", "sum pooling only");
}

// The formula on aten's ops: stacked (or concatenated and viewed) features, Z = T T^T, the
// pairs gathered after the first feature.
at::Tensor reference(const std::vector<at::Tensor> &features, bool viewed, const at::Tensor &rows,
                     const at::Tensor &cols) {
    std::vector<at::Tensor> wide;
    for (const at::Tensor &f : features) wide.push_back(f.to(at::kDouble));
    const at::Tensor t = viewed ? at::cat(wide, 1).view({wide[0].size(0), -1, wide[0].size(1)}) : at::stack(wide, 1);
    const at::Tensor z = at::bmm(t, t.transpose(1, 2));
    return at::cat({wide[0], at::index(z, c10::List<c10::optional<at::Tensor>>({c10::nullopt, rows, cols}))}, 1);
}

std::vector<at::Tensor> random_features(int64_t n, int64_t batch, int64_t dim) {
    std::vector<at::Tensor> out;
    for (int64_t f = 0; f < n; ++f) out.push_back(at::randn({batch, dim}));
    return out;
}

TEST_F(Recsys, InteractionMatchesTheFormula) {
    for (int64_t n : {1, 2, 5, 27}) {
        for (int64_t dim : {0, 1, 5, 16, 17, 33}) {
            for (int64_t batch : {0, 1, 7}) {
                const std::vector<at::Tensor> x = random_features(n, batch, dim);
                const at::Tensor tril = at::tril_indices(n, n, -1);
                const std::vector<int64_t> view{batch, -1, dim};
                for (bool viewed : {false, true}) {
                    if (viewed && batch * dim == 0) continue;  // view(.., -1, ..) of nothing: aten refuses it
                    const auto view_size = viewed ? c10::optional<at::IntArrayRef>(view) : c10::nullopt;
                    const at::Tensor want = reference(x, viewed, tril[0], tril[1]);
                    const at::Tensor by_tril = interaction(x, view_size, c10::nullopt, c10::nullopt, -1, c10::nullopt);
                    const at::Tensor by_pairs = interaction(x, view_size, tril[0], tril[1], 0, c10::nullopt);
                    ASSERT_EQ(by_tril.sizes(), want.sizes());
                    EXPECT_LE(relative_error(by_tril, want), kFp32Tolerance) << n << " " << dim << " " << batch;
                    EXPECT_TRUE(at::equal(by_tril, by_pairs));
                }
                // Upper triangle with the diagonal, negative indices: any pairs.
                const at::Tensor triu = at::triu_indices(n, n, 0);
                EXPECT_LE(relative_error(interaction(x, c10::nullopt, triu[0] - n, triu[1], 0, c10::nullopt),
                                         reference(x, false, triu[0], triu[1])),
                          kFp32Tolerance);
            }
        }
    }
}

TEST_F(Recsys, InteractionOutsideTheKernelIsAtensFormula) {
    // Features of unequal widths viewed as [B, 4, 3]: aten's ops compute it.
    const std::vector<at::Tensor> x{at::randn({2, 6}), at::randn({2, 3}), at::randn({2, 3})};
    const at::Tensor tril = at::tril_indices(4, 4, -1);
    const std::vector<int64_t> view{2, 4, 3};
    const at::Tensor t = at::cat(x, 1).view(view);
    const at::Tensor z = at::bmm(t, t.transpose(1, 2));
    const at::Tensor want =
        at::cat({x[0], at::index(z, c10::List<c10::optional<at::Tensor>>({c10::nullopt, tril[0], tril[1]}))}, 1);
    EXPECT_TRUE(
        at::allclose(interaction(x, at::IntArrayRef(view), c10::nullopt, c10::nullopt, -1, c10::nullopt), want));
    // Index tensors that are not pairs (a mask, broadcast shapes): aten's indexing.
    const std::vector<at::Tensor> y = random_features(3, 2, 4);
    const at::Tensor s = at::stack(y, 1);
    const at::Tensor gram = at::bmm(s, s.transpose(1, 2));
    const at::Tensor mask = at::tensor({1, 0, 1}, at::kByte).to(at::kBool), some = at::tensor({0, 2}, at::kLong);
    for (const auto &[rows, cols] : {std::make_pair(mask, mask), std::make_pair(some, at::tensor({1}, at::kLong))}) {
        const auto index = c10::List<c10::optional<at::Tensor>>({c10::nullopt, rows, cols});
        const at::Tensor expected = at::cat({y[0], at::index(gram, index)}, 1);
        EXPECT_TRUE(at::allclose(interaction(y, c10::nullopt, rows, cols, 0, c10::nullopt), expected));
    }
}

TEST_F(Recsys, InteractionBf16) {
    const std::vector<at::Tensor> x = random_features(9, 5, 40);
    std::vector<at::Tensor> xb, xr;
    for (const at::Tensor &f : x) {
        xb.push_back(f.to(at::kBFloat16));
        xr.push_back(xb.back().to(at::kFloat));
    }
    const at::Tensor tril = at::tril_indices(9, 9, -1);
    const at::Tensor got = interaction(xb, c10::nullopt, c10::nullopt, c10::nullopt, -1, c10::nullopt);
    EXPECT_EQ(got.scalar_type(), at::kBFloat16);
    EXPECT_LE(relative_error(got, reference(xr, false, tril[0], tril[1])), kBf16Tolerance);
}

// A bf16 model: the dense vector bf16, the tables' outputs fp32, T cast to bf16 before the bmm.
TEST_F(Recsys, InteractionCastsTheFeaturesAsTheModelDid) {
    std::vector<at::Tensor> x = random_features(4, 3, 24);
    x[0] = x[0].to(at::kBFloat16);
    std::vector<at::Tensor> rounded;
    for (const at::Tensor &f : x) rounded.push_back(f.to(at::kBFloat16).to(at::kFloat));
    const at::Tensor tril = at::tril_indices(4, 4, -1);
    const std::vector<int64_t> view{3, -1, 24};
    for (bool viewed : {false, true}) {
        const auto view_size = viewed ? c10::optional<at::IntArrayRef>(view) : c10::nullopt;
        const at::Tensor got = interaction(x, view_size, c10::nullopt, c10::nullopt, -1, at::kBFloat16);
        EXPECT_EQ(got.scalar_type(), at::kBFloat16);
        EXPECT_LE(relative_error(got, reference(rounded, viewed, tril[0], tril[1])), kBf16Tolerance);
    }
    // A dense vector of another dtype than the cast: aten's promotion, as the model had it.
    x[0] = x[0].to(at::kFloat);
    EXPECT_EQ(interaction(x, c10::nullopt, c10::nullopt, c10::nullopt, -1, at::kBFloat16).scalar_type(), at::kFloat);
}

// The order interaction_kernel.h documents, which the AVX-512 build also keeps: 16 lane sums,
// then pairwise.
float documented_dot(const float *x, const float *y, int64_t dim) {
    float lanes[kDotLanes] = {};
    for (int64_t k = 0; k < dim; ++k) lanes[k % kDotLanes] += x[k] * y[k];
    for (int64_t width = kDotLanes / 2; width >= 1; width /= 2)
        for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    return lanes[0];
}

TEST_F(Recsys, InteractionSumsInTheDocumentedOrder) {
    for (int64_t dim : {1, 15, 16, 17, 40, 128}) {
        const std::vector<at::Tensor> x = random_features(3, 2, dim);
        const at::Tensor got = interaction(x, c10::nullopt, c10::nullopt, c10::nullopt, -1, c10::nullopt);
        const at::Tensor tril = at::tril_indices(3, 3, -1);
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t q = 0; q < tril.size(1); ++q) {
                const float want = documented_dot(x[tril[0][q].item<int64_t>()][b].data_ptr<float>(),
                                                  x[tril[1][q].item<int64_t>()][b].data_ptr<float>(), dim);
                EXPECT_EQ(got[b][dim + q].item<float>(), want) << "dim " << dim;
            }
    }
}

TEST_F(Recsys, InteractionAvx512BuildMatchesThePortableOneToTheBit) {
    if (!avx512::available()) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, VL): the AVX-512 build cannot run";
    for (bool bf16 : {false, true}) {
        for (int64_t dim : {1, 15, 16, 17, 128}) {
            std::vector<at::Tensor> x = random_features(6, 4, dim);
            if (bf16)
                for (at::Tensor &f : x) f = f.to(at::kBFloat16);
            const at::Tensor tril = at::tril_indices(6, 6, 0);
            std::vector<const void *> data;
            std::vector<int64_t> stride;
            for (const at::Tensor &f : x) data.push_back(f.data_ptr()), stride.push_back(f.stride(0));
            const std::vector<int64_t> rows(tril[0].data_ptr<int64_t>(), tril[0].data_ptr<int64_t>() + tril.size(1));
            const std::vector<int64_t> cols(tril[1].data_ptr<int64_t>(), tril[1].data_ptr<int64_t>() + tril.size(1));
            at::Tensor portable = at::empty({4, dim + tril.size(1)}, x[0].options());
            at::Tensor vector = at::empty_like(portable);
            InteractionProblem p;
            p.bf16 = bf16;
            p.features = data.data();
            p.feature_stride = stride.data();
            p.features_n = 6;
            p.dim = dim;
            p.rows = rows.data();
            p.cols = cols.data();
            p.pairs = static_cast<int64_t>(rows.size());
            p.b_end = 4;
            p.dst = portable.data_ptr();
            run_interaction(p);
            p.dst = vector.data_ptr();
            avx512::run_interaction(p);
            EXPECT_TRUE(at::equal(portable, vector)) << "bf16 " << bf16 << " dim " << dim;
        }
    }
}

// A vector build of the row step against the portable one, bit for bit, every row type, dims
// with and without a tail.
void expect_row_step_matches_portable(void (*step)(const void *, RowType, const float *, int64_t, float *)) {
    for (RowType type : {RowType::fp32, RowType::bf16, RowType::uint8_rowwise}) {
        for (int64_t dim : {1, 7, 8, 9, 15, 16, 17, 128}) {
            const at::Tensor fp32 = at::randn({5, dim});
            const at::Tensor rows = type == RowType::bf16            ? fp32.to(at::kBFloat16)
                                    : type == RowType::uint8_rowwise ? quantize_rows_uint8(fp32)
                                                                     : fp32;
            const at::Tensor weights = at::rand({5});
            for (bool weighted : {false, true}) {
                std::vector<float> portable(static_cast<size_t>(dim) + 1, 0.5f), vector = portable;
                for (int64_t r = 0; r < 5; ++r) {
                    const char *row = static_cast<const char *>(rows.data_ptr()) + r * rows.stride(0) * rows.element_size();
                    const float *w = weighted ? weights.data_ptr<float>() + r : nullptr;
                    add_row(row, type, w, dim, portable.data());
                    step(row, type, w, dim, vector.data());
                }
                // The guard past dim included.
                EXPECT_EQ(portable, vector) << "type " << static_cast<int>(type) << " dim " << dim;
            }
        }
    }
}

TEST_F(Recsys, EmbeddingBagAvx512RowStepMatchesThePortableOneToTheBit) {
    if (!avx512::available()) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, VL): the AVX-512 build cannot run";
    expect_row_step_matches_portable(avx512::add_row);
}

TEST_F(Recsys, EmbeddingBagAvx2RowStepMatchesThePortableOneToTheBit) {
    if (!isa::avx2()) GTEST_SKIP() << "this CPU has no AVX2: the AVX2 build cannot run";
    expect_row_step_matches_portable(avx2::add_row);
}

TEST_F(Recsys, InteractionRefusesPairsOutsideTheFeatures) {
    const std::vector<at::Tensor> x = random_features(3, 2, 4);
    expect_input_error(
        [&] {
            interaction(x, c10::nullopt, at::tensor({0, 3}), at::tensor({0, 1}), 0, c10::nullopt);
        },
        "interaction", "rows[1] = 3");
    expect_input_error(
        [&] {
            interaction(x, c10::nullopt, at::tensor({0, 1}), at::tensor({-4, 1}), 0, c10::nullopt);
        },
        "interaction", "cols[0] = -4");
}

}  // namespace
}  // namespace ipex::ops::recsys
