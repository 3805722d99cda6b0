// ipex::matmul against an fp64 aten reference: ranks 2-5, broadcast batch dims, transposed and
// permuted (strided) operands, expanded operands, odd sizes, fp32 and bf16; the aten fallback
// for 1-D and integer operands; bf16 without a oneDNN bf16 kernel computed in fp32 and rounded
// once; mismatched shapes are input errors; the shared cache is bounded.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "ops/matmul_op.h"
#include "ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using testing::cosine;
using testing::max_relative_error;

at::Tensor reference(const at::Tensor &a, const at::Tensor &b) {
    return at::matmul(a.to(at::kDouble), b.to(at::kDouble));
}

void expect_matches(const at::Tensor &a, const at::Tensor &b) {
    const at::Tensor got = ops::matmul(a, b);
    const at::Tensor want = reference(a, b);
    ASSERT_EQ(got.sizes(), want.sizes()) << a.sizes() << " x " << b.sizes();
    EXPECT_EQ(got.scalar_type(), a.scalar_type());
    if (a.scalar_type() == at::kFloat) {
        EXPECT_LT(max_relative_error(got, want), 1e-5) << a.sizes() << " x " << b.sizes();
    } else if (ipex::testing::onednn_lacks("bf16").empty()) {
        EXPECT_GT(cosine(got, want), 0.9999) << a.sizes() << " x " << b.sizes();
        EXPECT_LT(max_relative_error(got, want), 3e-2) << a.sizes() << " x " << b.sizes();
    } else {
        // No oneDNN bf16 matmul on this CPU: the fp32 matmul of the same values rounded to bf16
        // once: within fp32's bound on a k-term sum (k * 2^-24 * sum |a||b|) and then half a
        // bf16 step (2^-8 of the value).
        const at::Tensor sums = at::matmul(a.abs().to(at::kDouble), b.abs().to(at::kDouble));
        const at::Tensor fp32_error = sums.mul(static_cast<double>(a.size(-1)) * std::ldexp(1.0, -24));
        const at::Tensor bound = want.abs().add(fp32_error).mul(std::ldexp(1.0, -8)).add(fp32_error);
        EXPECT_TRUE(got.to(at::kDouble).sub(want).abs().le(bound).all().item<bool>()) << a.sizes() << " x " << b.sizes();
    }
}

class OpsMatmul : public ::testing::TestWithParam<at::ScalarType> {
protected:
    void SetUp() override { at::manual_seed(3); }
    at::Tensor randn(at::IntArrayRef sizes) const { return at::randn(sizes).to(GetParam()); }
};

TEST_P(OpsMatmul, PlainShapes) {
    for (const auto &[m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 1, 1}, {7, 13, 5}, {64, 64, 64}, {128, 64, 128}, {33, 100, 17}, {1, 768, 3}})
        expect_matches(randn({m, k}), randn({k, n}));
}

TEST_P(OpsMatmul, BatchedAndBroadcast) {
    expect_matches(randn({3, 5, 7}), randn({3, 7, 4}));
    expect_matches(randn({2, 3, 5, 7}), randn({2, 3, 7, 4}));
    expect_matches(randn({2, 3, 5, 7}), randn({7, 4}));        // rank promotion
    expect_matches(randn({5, 7}), randn({2, 3, 7, 4}));
    expect_matches(randn({2, 1, 5, 7}), randn({1, 3, 7, 4}));  // both broadcast
    expect_matches(randn({2, 2, 2, 3, 5}), randn({2, 1, 2, 5, 6}));
}

TEST_P(OpsMatmul, StridedOperands) {
    // Attention's shapes: q [B, H, L, D] as a transposed view of [B, L, H, D], kᵀ as a transpose.
    const at::Tensor q = randn({2, 9, 4, 16}).transpose(1, 2);
    const at::Tensor k = randn({2, 9, 4, 16}).transpose(1, 2);
    expect_matches(q, k.transpose(-2, -1));
    const at::Tensor probs = at::softmax(ops::matmul(q, k.transpose(-2, -1)).to(at::kFloat), -1).to(GetParam());
    expect_matches(probs, randn({2, 9, 4, 16}).transpose(1, 2));
    // Slices of a merged projection (q/k/v from one [B, L, 3, H, D] tensor).
    const at::Tensor qkv = randn({2, 6, 3, 2, 8}).permute({2, 0, 3, 1, 4});
    expect_matches(qkv[0], qkv[1].transpose(-2, -1));
    expect_matches(randn({8, 5}).t(), randn({8, 3}));
    // Expanded (stride 0) operands are copied first.
    expect_matches(randn({1, 5, 7}).expand({4, 5, 7}), randn({4, 7, 3}));
    expect_matches(randn({5, 7}).narrow(1, 2, 4), randn({4, 3}));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OpsMatmul, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const ::testing::TestParamInfo<at::ScalarType> &info) {
                             return std::string(info.param == at::kFloat ? "fp32" : "bf16");
                         });

TEST(OpsMatmulFallback, OtherRanksAndDtypesGoToAten) {
    const at::Tensor v = at::randn({7}), m = at::randn({7, 3});
    EXPECT_TRUE(ops::matmul(v, m).allclose(at::matmul(v, m)));
    EXPECT_TRUE(ops::matmul(m.t(), v.narrow(0, 0, 7)).allclose(at::matmul(m.t(), v)));
    const at::Tensor i = at::randint(0, 5, {3, 4}, at::kLong), j = at::randint(0, 5, {4, 2}, at::kLong);
    EXPECT_TRUE(ops::matmul(i, j).equal(at::matmul(i, j)));
    EXPECT_EQ(ops::matmul(at::randn({0, 4}), at::randn({4, 3})).sizes(), (std::vector<int64_t>{0, 3}));
    const at::Tensor empty_k = ops::matmul(at::randn({2, 0}), at::randn({0, 3}));
    EXPECT_TRUE(empty_k.equal(at::zeros({2, 3})));
}

TEST(OpsMatmulErrors, MismatchedShapesAreInputErrors) {
    try {
        ops::matmul(at::randn({2, 3}), at::randn({4, 5}));
        FAIL() << "no error";
    } catch (const c10::Error &e) {
        EXPECT_NE(std::string(e.what()).find("cannot be multiplied"), std::string::npos) << e.what();
    }
    EXPECT_THROW(ops::matmul(at::randn({2, 2, 3}), at::randn({3, 3, 4})), c10::Error);
}

TEST(OpsMatmulCache, BoundedAcrossManyShapes) {
    for (int64_t n = 1; n <= 300; ++n) ops::matmul(at::randn({2, n, 8}), at::randn({2, 8, 4}));
    EXPECT_LE(matmul_cached_primitives(), 256u);
    EXPECT_GE(matmul_cached_primitives(), 100u);
}

}  // namespace
}  // namespace ipex::ops
