// ipex::int8_max_pool2d against aten::max_pool2d (bit-exact, sizes and quantization
// parameters) over channel counts around the vector widths, window geometries, ceil mode,
// both dtypes; what it does not take (NCHW, float, bad arguments) gives aten's answer or error.
// ipex::int8_adaptive_avg_pool2d's global pool against aten::adaptive_avg_pool2d the same way,
// over channel counts, pixel counts (1 to 56x56), zero points and scales.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ops/int8/int8_pool.h"

namespace ipex::quant {
namespace {

struct Geometry {
    std::vector<int64_t> k, s, p, d;
    bool ceil;
};

TEST(Int8MaxPool2d, MatchesAtenOverChannelsGeometriesAndTypes) {
    at::manual_seed(10);
    const std::vector<Geometry> geometries = {{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
                                              {{2, 2}, {}, {0, 0}, {1, 1}, false},
                                              {{3, 3}, {2, 2}, {0, 0}, {1, 1}, true},
                                              {{3, 2}, {1, 2}, {1, 0}, {2, 1}, false},
                                              {{5, 5}, {3, 3}, {2, 2}, {1, 1}, true},
                                              // dilated across the row with padding: windows whose
                                              // first columns lie left of it
                                              {{3, 3}, {2, 1}, {1, 1}, {2, 2}, false},
                                              {{2, 3}, {1, 1}, {1, 1}, {1, 3}, true},
                                              {{1, 1}, {2, 2}, {0, 0}, {1, 1}, false}};  // one row
    for (int64_t c : {1, 3, 24, 63, 64, 65, 116})
        for (at::ScalarType dtype : {at::kQUInt8, at::kQInt8})
            for (const Geometry &g : geometries) {
                const at::Tensor q = at::quantize_per_tensor(at::randn({2, c, 13, 11}) * 3, 0.05,
                                                             dtype == at::kQInt8 ? -2 : 60, dtype)
                                         .contiguous(at::MemoryFormat::ChannelsLast);
                const std::string what = "c " + std::to_string(c) + " " + c10::toString(dtype) + " k " +
                                         c10::str(at::IntArrayRef(g.k)) + " s " + c10::str(at::IntArrayRef(g.s)) +
                                         (g.ceil ? " ceil" : "");
                const at::Tensor want = at::max_pool2d(q, g.k, g.s, g.p, g.d, g.ceil);
                const at::Tensor got = int8_max_pool2d(q, g.k, g.s, g.p, g.d, g.ceil);
                ASSERT_EQ(got.sizes(), want.sizes()) << what;
                EXPECT_EQ(got.q_scale(), q.q_scale()) << what;
                EXPECT_EQ(got.q_zero_point(), q.q_zero_point()) << what;
                EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
                EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr())) << what;
            }
}

TEST(Int8MaxPool2d, WhatItDoesNotTakeIsAtens) {
    at::manual_seed(11);
    const at::Tensor nchw = at::quantize_per_tensor(at::randn({1, 24, 9, 9}), 0.05, 3, at::kQUInt8);
    EXPECT_TRUE(at::equal(int8_max_pool2d(nchw, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false).int_repr(),
                          at::max_pool2d(nchw, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false).int_repr()));
    const at::Tensor f = at::randn({1, 24, 9, 9});
    EXPECT_TRUE(at::equal(int8_max_pool2d(f, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false),
                          at::max_pool2d(f, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)));
    const at::Tensor q = nchw.contiguous(at::MemoryFormat::ChannelsLast);
    EXPECT_THROW(int8_max_pool2d(q, {3, 3}, {2, 2}, {2, 2}, {1, 1}, false), c10::Error);  // padding > half
    EXPECT_THROW(int8_max_pool2d(q, {0, 3}, {2, 2}, {0, 0}, {1, 1}, false), c10::Error);
    EXPECT_THROW(int8_max_pool2d(q, {30, 30}, {1, 1}, {0, 0}, {1, 1}, false), c10::Error);  // no window fits
}

TEST(Int8AdaptiveAvgPool2d, GlobalPoolMatchesAten) {
    at::manual_seed(12);
    int64_t checked = 0;
    for (int64_t c : {1, 15, 16, 17, 64, 130, 2048})
        for (auto [h, w] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {3, 5}, {56, 56}})
            for (at::ScalarType dtype : {at::kQUInt8, at::kQInt8}) {
                if (c == 2048 && h == 56) continue;
                const int64_t zp = dtype == at::kQInt8 ? -7 : 131;
                const double scale = 0.01 + 0.003 * static_cast<double>(c % 7);
                const at::Tensor q = at::quantize_per_tensor(at::randn({3, c, h, w}) * 2, scale, zp, dtype)
                                         .contiguous(at::MemoryFormat::ChannelsLast);
                const std::string what = "c " + std::to_string(c) + " " + std::to_string(h) + "x" +
                                         std::to_string(w) + " " + c10::toString(dtype);
                const at::Tensor want = at::adaptive_avg_pool2d(q, {1, 1});
                const at::Tensor got = int8_adaptive_avg_pool2d(q, {1, 1});
                ASSERT_EQ(got.sizes(), want.sizes()) << what;
                EXPECT_EQ(got.q_scale(), want.q_scale()) << what;
                EXPECT_EQ(got.q_zero_point(), want.q_zero_point()) << what;
                EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr())) << what;
                checked += got.numel();
            }
    EXPECT_GT(checked, 10000);
}

TEST(Int8AdaptiveAvgPool2d, WhatItDoesNotTakeIsAtens) {
    at::manual_seed(13);
    const at::Tensor nchw = at::quantize_per_tensor(at::randn({2, 24, 9, 9}), 0.05, 3, at::kQUInt8);
    const at::Tensor q = nchw.contiguous(at::MemoryFormat::ChannelsLast);
    const auto same = [](const at::Tensor &a, const at::Tensor &b) {
        return a.sizes() == b.sizes() && at::equal(a.int_repr(), b.int_repr());
    };
    EXPECT_TRUE(same(int8_adaptive_avg_pool2d(nchw, {1, 1}), at::adaptive_avg_pool2d(nchw, {1, 1})));
    EXPECT_TRUE(same(int8_adaptive_avg_pool2d(q, {2, 3}), at::adaptive_avg_pool2d(q, {2, 3})));
    const at::Tensor f = at::randn({2, 24, 9, 9});
    EXPECT_TRUE(at::equal(int8_adaptive_avg_pool2d(f, {1, 1}), at::adaptive_avg_pool2d(f, {1, 1})));
}

}  // namespace
}  // namespace ipex::quant
