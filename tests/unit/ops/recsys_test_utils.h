// What the recommendation ops' tests share: tables of random bags (empty ones included), aten's
// embedding_bag on them, the merged op on a list of them, and the input-error check.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "ops/recsys/recsys_ops.h"

namespace ipex::ops::recsys::testing_recsys {

constexpr double kFp32Tolerance = 1e-5;  // relative to the largest output
constexpr double kBf16Tolerance = 1e-2;  // one bf16 rounding of each output

inline double relative_error(const at::Tensor &got, const at::Tensor &want) {
    if (want.numel() == 0) return got.numel() == 0 ? 0.0 : 1.0;
    const double scale = std::max(1.0, want.abs().max().item<double>());
    return (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>() / scale;
}

// One table's arguments and what aten computes from them.
struct Case {
    at::Tensor weight, indices, offsets, psw;
    int64_t padding_idx = -1;  // as the merged op takes it
};

// Bags of random sizes (some 0) over a table of `rows` rows.
inline Case make_case(int64_t rows, int64_t dim, int64_t bags, at::ScalarType index_dtype, bool include_last_offset,
               bool weighted, int64_t padding_idx) {
    Case c;
    c.weight = at::randn({rows, dim});
    const at::Tensor sizes = at::randint(0, 5, {bags}, at::kLong);
    if (bags > 1) sizes[1] = 0;  // an empty bag
    const int64_t total = bags ? sizes.sum().item<int64_t>() : 0;
    c.indices = at::randint(0, rows, {total}, at::kLong).to(index_dtype);
    if (padding_idx >= 0 && total > 2) c.indices.slice(0, 0, 3).fill_(padding_idx);
    at::Tensor ends = at::cumsum(sizes, 0);
    c.offsets = at::cat({at::zeros({1}, at::kLong), ends}).slice(0, 0, include_last_offset ? bags + 1 : bags);
    c.offsets = c.offsets.to(index_dtype);
    if (weighted) c.psw = at::rand({total});
    c.padding_idx = padding_idx;
    return c;
}

inline at::Tensor aten_bag(const Case &c, int64_t mode, bool include_last_offset) {
    const c10::optional<int64_t> padding = c.padding_idx >= 0 ? c10::optional<int64_t>(c.padding_idx) : c10::nullopt;
    return std::get<0>(at::embedding_bag(c.weight, c.indices, c.offsets, false, mode, false,
                                         c.psw.defined() ? c10::optional<at::Tensor>(c.psw) : c10::nullopt,
                                         include_last_offset, padding));
}

inline std::vector<at::Tensor> merged(const std::vector<Case> &cases, int64_t mode, bool include_last_offset,
                               c10::optional<at::ScalarType> dtype = c10::nullopt, at::ScalarType stored = at::kFloat) {
    std::vector<at::Tensor> weights, indices, offsets;
    c10::List<c10::optional<at::Tensor>> psw;
    std::vector<int64_t> padding;
    for (const Case &c : cases) {
        weights.push_back(stored == at::kByte ? quantize_rows_uint8(c.weight) : c.weight.to(stored));
        indices.push_back(c.indices);
        offsets.push_back(c.offsets);
        psw.push_back(c.psw.defined() ? c10::optional<at::Tensor>(c.psw) : c10::nullopt);
        padding.push_back(c.padding_idx);
    }
    return merged_embedding_bag(weights, indices, offsets, psw, padding, mode, include_last_offset, dtype);
}

class Recsys : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

inline void expect_input_error(const std::function<void()> &call, const std::string &op, const std::string &mention) {
    try {
        call();
        ADD_FAILURE() << "no error; expected " << mention;
    } catch (const c10::Error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(op), std::string::npos) << what;
        EXPECT_NE(what.find(mention), std::string::npos) << what;
    }
}

}  // namespace ipex::ops::recsys::testing_recsys
