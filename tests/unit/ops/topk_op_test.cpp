// ipex::topk against aten::topk: the own kernel on long fp32 rows (one row split over the
// threads, several rows, rows of a strided view, k from 1 to n / 64) gives aten's values and,
// without ties, aten's indices; with ties and NaNs the same values, each index holding its
// value, equal values lowest index first; every case the kernel does not take is aten's result
// bit for bit.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "ops/topk_op.h"

namespace ipex::ops {
namespace {

void expect_same(const at::Tensor &x, int64_t k, int64_t dim, bool largest, bool sorted, const std::string &what) {
    const auto [values, indices] = ops::topk(x, k, dim, largest, sorted);
    const auto [want_values, want_indices] = at::topk(x, k, dim, largest, sorted);
    EXPECT_TRUE(at::equal(values, want_values)) << what;
    EXPECT_TRUE(at::equal(indices, want_indices)) << what;
}

TEST(IpexTopk, LongRowsMatchAten) {
    at::manual_seed(4);
    // Distinct values (a permutation of 0..n-1 per row, less 0.5): no ties, so aten's indices are
    // the only right ones (randn's fp32 values repeat among 300000).
    const auto distinct = [](std::vector<int64_t> sizes) {
        return std::get<1>(at::rand(sizes).sort(-1)).to(at::kFloat).sub_(0.5);
    };
    const at::Tensor row = distinct({300000});
    for (int64_t k : {1, 7, 1000, 300000 / 64}) {
        ASSERT_TRUE(topk_own_kernel(row, k, -1, true, true)) << k;
        expect_same(row, k, -1, true, true, "one row, k " + std::to_string(k));
    }
    const at::Tensor rows = distinct({3, 5, 70000});
    ASSERT_TRUE(topk_own_kernel(rows, 100, 2, true, true));
    expect_same(rows, 100, 2, true, true, "3x5 rows");
    // Rows of a view: every other row of a wider tensor.
    const at::Tensor strided = distinct({8, 70000}).slice(0, 0, 8, 2);
    ASSERT_TRUE(topk_own_kernel(strided, 50, -1, true, true));
    expect_same(strided, 50, -1, true, true, "strided rows");
    // The output's shape: the dim holds k.
    EXPECT_EQ(std::get<0>(ops::topk(rows, 100, -1, true, true)).sizes(), (std::vector<int64_t>{3, 5, 100}));
}

TEST(IpexTopk, TiesAndNans) {
    at::manual_seed(5);
    // 20 distinct values over 200000 places, some NaN: many ties at the k-th place.
    at::Tensor row = at::randint(0, 20, {200000}).to(at::kFloat);
    row.index_put_({at::randint(0, 200000, {30})}, std::nanf(""));
    const int64_t k = 2000;
    const auto [values, indices] = ops::topk(row, k, 0, true, true);
    const auto [want_values, want_indices] = at::topk(row, k, 0, true, true);
    // The same values (NaN first), each index holding its value, equal values lowest index first.
    EXPECT_TRUE(at::equal(values.isnan(), want_values.isnan()));
    EXPECT_TRUE(at::equal(values.nan_to_num(1e9), want_values.nan_to_num(1e9)));
    EXPECT_TRUE(at::equal(row.index_select(0, indices).nan_to_num(1e9), values.nan_to_num(1e9)));
    const float *v = values.data_ptr<float>();
    const int64_t *ix = indices.data_ptr<int64_t>();
    for (int64_t j = 1; j < k; ++j) {
        const bool same = (std::isnan(v[j]) && std::isnan(v[j - 1])) || v[j] == v[j - 1];
        if (same) EXPECT_LT(ix[j - 1], ix[j]) << j;
    }
    // The lowest indices of the last value taken: nothing with that value before them was left out.
    const float last = v[k - 1];
    const int64_t taken = (values == last).sum().item<int64_t>();
    const at::Tensor places = (row == last).nonzero().flatten().slice(0, 0, taken);
    EXPECT_TRUE(at::equal(std::get<0>(indices.masked_select(values == last).sort()), places));
}

TEST(IpexTopk, OtherCasesAreAtensResults) {
    at::manual_seed(6);
    const at::Tensor x = at::randn({4, 3000});
    struct Case {
        at::Tensor t;
        int64_t k, dim;
        bool largest, sorted;
        std::string what;
    };
    const std::vector<Case> cases = {
        {x, 100, -1, true, true, "k * 64 > n"},
        {x, 10, -1, false, true, "smallest"},
        {x, 10, -1, true, false, "unsorted"},
        {x, 2, 0, true, true, "not the last dim"},
        {x.to(at::kBFloat16), 10, -1, true, true, "bf16"},
        {x.to(at::kDouble), 10, -1, true, true, "fp64"},
        {x.t(), 1, -1, true, true, "last dim strided"},
        {at::randn({0, 1000}), 5, -1, true, true, "no rows"},
    };
    for (const Case &c : cases) {
        EXPECT_FALSE(topk_own_kernel(c.t, c.k, c.dim, c.largest, c.sorted)) << c.what;
        expect_same(c.t, c.k, c.dim, c.largest, c.sorted, c.what);
    }
    // aten's errors stay aten's.
    EXPECT_THROW(ops::topk(x, 4000, -1, true, true), c10::Error);
}

}  // namespace
}  // namespace ipex::ops
