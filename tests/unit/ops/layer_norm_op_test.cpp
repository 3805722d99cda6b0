// ipex::layer_norm / ipex::add_layer_norm against a naive fp64 reference written here (sum,
// mean, biased variance, row by row): row lengths around the 16-lane vector (1, 15, 16, 17),
// odd and model sizes, fp32 and bf16 operands in every mix, alpha, with and without weight and
// bias, the sum output, strided inputs; broadcast and fp64 operands (the aten path); bad shapes
// are caller-input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/errors.h"
#include "core/run_errors.h"
#include "ops/layer_norm_op.h"
#include "ops/op_errors.h"
#include "ops_test_utils.h"

namespace ipex::ops {
namespace {

using testing::max_relative_error;

// (sum, out) in fp64; the sum rounded to `sum_type` first, as the op defines.
std::pair<at::Tensor, at::Tensor> naive(const at::Tensor &x, const at::Tensor &y, double alpha, int64_t cols,
                                        const at::Tensor &w, const at::Tensor &b, double eps, at::ScalarType sum_type) {
    at::Tensor s = x.to(at::kDouble);
    if (y.defined()) s = s + alpha * y.to(at::kDouble).expand(x.sizes());
    s = s.to(sum_type).to(at::kDouble).contiguous();
    const at::Tensor rows = s.reshape({-1, cols});
    at::Tensor out = at::empty_like(rows);
    auto sa = rows.accessor<double, 2>();
    auto oa = out.accessor<double, 2>();
    for (int64_t r = 0; r < rows.size(0); ++r) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < cols; ++j) mean += sa[r][j];
        mean /= static_cast<double>(cols);
        for (int64_t j = 0; j < cols; ++j) var += (sa[r][j] - mean) * (sa[r][j] - mean);
        var /= static_cast<double>(cols);
        for (int64_t j = 0; j < cols; ++j) {
            double v = (sa[r][j] - mean) / std::sqrt(var + eps);
            if (w.defined()) v *= w.reshape({-1})[j].item<double>();
            if (b.defined()) v += b.reshape({-1})[j].item<double>();
            oa[r][j] = v;
        }
    }
    return {s, out.reshape(s.sizes())};
}

c10::optional<at::Tensor> opt(const at::Tensor &t) { return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt; }

struct Case {
    int64_t rows, cols;
    at::ScalarType in, other;  // other kUndefined: no add
    bool affine;
    double alpha;
};

void check(const Case &c) {
    const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " +
                             c10::toString(c.in) + " + " + c10::toString(c.other) + (c.affine ? " affine" : "") +
                             " alpha " + std::to_string(c.alpha);
    const at::Tensor x = (at::randn({c.rows, c.cols}) * 3 + 1).to(c.in);
    const at::Tensor y = c.other == at::ScalarType::Undefined ? at::Tensor() : at::randn({c.rows, c.cols}).to(c.other);
    const at::Tensor w = c.affine ? at::randn({c.cols}) : at::Tensor();
    const at::Tensor b = c.affine ? at::randn({c.cols}) : at::Tensor();
    const at::ScalarType out_type = y.defined() ? at::result_type(x, y) : c.in;
    const auto [s_want, want] = naive(x, y, c.alpha, c.cols, w, b, 1e-5, out_type);
    const at::Tensor got = layer_norm(x, opt(y), c.alpha, {c.cols}, opt(w), opt(b), 1e-5);
    EXPECT_EQ(got.scalar_type(), out_type) << what;
    // bf16 outputs: one rounding of values up to ~|w| * 4 + |b|.
    const double tol = out_type == at::kBFloat16 ? 1e-2 : 1e-5;
    const bool bf16 = c.in == at::kBFloat16 || c.other == at::kBFloat16;
    if (layer_norm_kernel::available(bf16)) {
        EXPECT_LE(max_relative_error(got, want), tol) << what;
    } else {
        // A CPU without the kernel's ISA runs aten's layer_norm, which scales x and subtracts
        // the scaled mean in fp32: where a row's values are all equal (one column) its output
        // is 0 plus up to |x| / sqrt(eps) x 2^-24, not 0.
        const double scale = std::max(want.abs().max().item<double>(), 1.0);
        EXPECT_LE((got.to(at::kDouble) - want).abs().max().item<double>(), tol * scale + 1e-3) << what;
    }
    if (y.defined()) {
        const auto [s, out] = add_layer_norm(x, y, c.alpha, {c.cols}, opt(w), opt(b), 1e-5);
        // The kernel rounds x + alpha y once; aten's add rounds alpha y to bf16 first.
        const double sum_tol = out_type != at::kBFloat16 ? 1e-6 : layer_norm_kernel::available(bf16) ? 0.0 : 1.0 / 128;
        EXPECT_LE(max_relative_error(s, s_want), sum_tol) << what << " (sum)";
        EXPECT_TRUE(out.equal(got)) << what;
    }
}

TEST(LayerNormOp, MatchesTheNaiveReferenceForEveryDtypeMix) {
    at::manual_seed(3);
    const auto none = at::ScalarType::Undefined;
    for (int64_t cols : {1, 15, 16, 17, 40, 257, 768}) {
        for (auto in : {at::kFloat, at::kBFloat16}) {
            for (auto other : {none, at::kFloat, at::kBFloat16}) {
                check({5, cols, in, other, true, 1.0});
                check({3, cols, in, other, false, -0.75});
            }
        }
    }
    check({1000, 64, at::kBFloat16, at::kBFloat16, true, 1.0});  // many rows: split over threads
}

TEST(LayerNormOp, StridedBroadcastAndFp64OperandsGiveTheSameDefinition) {
    at::manual_seed(4);
    const at::Tensor w = at::randn({24}), b = at::randn({24});
    // Transposed input: read through a contiguous copy.
    const at::Tensor xt = at::randn({24, 6}).t();
    const at::Tensor h = at::randn({6, 24});
    auto [s1, want1] = naive(xt, h, 1.0, 24, w, b, 1e-5, at::kFloat);
    EXPECT_LE(max_relative_error(layer_norm(xt, h, 1.0, {24}, w, b, 1e-5), want1), 1e-5);
    // A [24] bias broadcast over the rows, and a [6, 1, 24] input meeting a [3, 24] other (both
    // broadcast): aten's add decides the shape.
    const at::Tensor bias = at::randn({24});
    auto [s2, want2] = naive(h, bias, 2.0, 24, w, b, 1e-5, at::kFloat);
    EXPECT_LE(max_relative_error(layer_norm(h, bias, 2.0, {24}, w, b, 1e-5), want2), 1e-5);
    const at::Tensor x3 = at::randn({6, 1, 24}), y3 = at::randn({3, 24});
    const at::Tensor got3 = layer_norm(x3, y3, 1.0, {24}, w, b, 1e-5);
    auto [s3, want3] = naive(x3.expand({6, 3, 24}), y3, 1.0, 24, w, b, 1e-5, at::kFloat);
    EXPECT_LE(max_relative_error(got3, want3), 1e-5);
    // fp64 stays fp64 (normalized in fp64).
    const at::Tensor xd = at::randn({4, 24}, at::kDouble);
    const at::Tensor gotd = layer_norm(xd, c10::nullopt, 1.0, {24}, w, b, 1e-5);
    EXPECT_EQ(gotd.scalar_type(), at::kDouble);
    auto [sd, wantd] = naive(xd, at::Tensor(), 1.0, 24, w, b, 1e-5, at::kDouble);
    EXPECT_LE(max_relative_error(gotd, wantd), 1e-12);
    // Two trailing dims normalized together.
    const at::Tensor x4 = at::randn({3, 5, 8});
    auto [s4, want4] = naive(x4, at::Tensor(), 1.0, 40, at::Tensor(), at::Tensor(), 1e-5, at::kFloat);
    EXPECT_LE(max_relative_error(layer_norm(x4, c10::nullopt, 1.0, {5, 8}, c10::nullopt, c10::nullopt, 1e-5), want4),
              1e-5);
}

TEST(LayerNormOp, BadShapesAreCallerInputErrors) {
    const at::Tensor x = at::randn({4, 24});
    auto expect_input_error = [](const std::function<void()> &f, const char *what) {
        try {
            f();
            ADD_FAILURE() << what << " was accepted";
        } catch (const c10::Error &e) {
            EXPECT_EQ(classify_run_error(e), RunErrorKind::caller_input) << what << ": " << e.what_without_backtrace();
        }
    };
    expect_input_error([&] { layer_norm(x, c10::nullopt, 1.0, {16}, c10::nullopt, c10::nullopt, 1e-5); },
                       "normalized_shape not trailing");
    expect_input_error([&] { layer_norm(x, at::randn({5, 24}), 1.0, {24}, c10::nullopt, c10::nullopt, 1e-5); },
                       "other not broadcasting");
    expect_input_error([&] { layer_norm(x, c10::nullopt, 1.0, {24}, at::randn({23}), c10::nullopt, 1e-5); },
                       "weight of the wrong size");
    expect_input_error([&] { layer_norm(x.to(at::kInt), c10::nullopt, 1.0, {24}, c10::nullopt, c10::nullopt, 1e-5); },
                       "an int input");
    expect_input_error([&] { layer_norm(x, c10::nullopt, 1.0, {}, c10::nullopt, c10::nullopt, 1e-5); },
                       "empty normalized_shape");
}

}  // namespace
}  // namespace ipex::ops
