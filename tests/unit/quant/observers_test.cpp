// Observers and quantization parameters against naive references.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "quant/observers.h"

namespace ipex::quant {
namespace {

std::vector<at::Tensor> batches(int n, std::vector<int64_t> shape, uint64_t seed) {
    at::manual_seed(seed);
    std::vector<at::Tensor> out;
    for (int i = 0; i < n; ++i) out.push_back(at::randn(shape) * (1.0 + i));
    return out;
}

// Naive fake quantization of every element; mean squared error.
double fake_quant_mse(const at::Tensor &x, const QParams &q, QDtype dtype) {
    const at::Tensor v = x.to(at::kDouble).contiguous();
    const double *p = v.data_ptr<double>();
    double sum = 0.0;
    for (int64_t i = 0; i < v.numel(); ++i) {
        double k = std::nearbyint(p[i] / q.scale) + static_cast<double>(q.zero_point);
        k = std::clamp(k, static_cast<double>(qmin(dtype)), static_cast<double>(qmax(dtype)));
        const double back = (k - static_cast<double>(q.zero_point)) * q.scale;
        sum += (back - p[i]) * (back - p[i]);
    }
    return sum / static_cast<double>(v.numel());
}

TEST(Observers, MinMaxMatchesNaiveScan) {
    auto obs = make_observer({ObserverKind::min_max});
    double lo = 1e30, hi = -1e30;
    for (const auto &b : batches(4, {3, 7}, 1)) {
        obs->observe(b);
        const at::Tensor d = b.to(at::kDouble).contiguous();
        for (int64_t i = 0; i < d.numel(); ++i) {
            lo = std::min(lo, d.data_ptr<double>()[i]);
            hi = std::max(hi, d.data_ptr<double>()[i]);
        }
    }
    EXPECT_DOUBLE_EQ(obs->range(QDtype::u8).min, lo);
    EXPECT_DOUBLE_EQ(obs->range(QDtype::u8).max, hi);
}

TEST(Observers, MovingAverageMatchesNaiveRecurrence) {
    ObserverParams params{ObserverKind::moving_average};
    params.averaging_constant = 0.25;
    auto obs = make_observer(params);
    double lo = 0, hi = 0;
    bool first = true;
    for (const auto &b : batches(5, {11}, 2)) {
        obs->observe(b);
        const double bmin = b.min().item<double>(), bmax = b.max().item<double>();
        if (first) {
            lo = bmin;
            hi = bmax;
            first = false;
        } else {
            lo = lo + 0.25 * (bmin - lo);
            hi = hi + 0.25 * (bmax - hi);
        }
    }
    EXPECT_NEAR(obs->range(QDtype::u8).min, lo, 1e-6);
    EXPECT_NEAR(obs->range(QDtype::u8).max, hi, 1e-6);
}

TEST(Observers, U8AffineParams) {
    const QParams q = qparams_for_range({-1.0, 3.0}, QDtype::u8);
    EXPECT_NEAR(q.scale, 4.0 / 255.0, 1e-12);
    EXPECT_EQ(q.zero_point, std::llround(1.0 / (4.0 / 255.0)));
    // A range that excludes zero is widened to hold it: zero is exact.
    const QParams pos = qparams_for_range({0.5, 2.0}, QDtype::u8);
    EXPECT_EQ(pos.zero_point, 0);
    EXPECT_NEAR(pos.scale, 2.0 / 255.0, 1e-12);
    const QParams neg = qparams_for_range({-2.0, -0.5}, QDtype::u8);
    EXPECT_EQ(neg.zero_point, 255);
}

TEST(Observers, S8SymmetricParams) {
    const QParams q = qparams_for_range({-0.5, 2.54}, QDtype::s8);
    EXPECT_EQ(q.zero_point, 0);
    EXPECT_NEAR(q.scale, 2.54 / 127.0, 1e-12);
    const QParams zero = qparams_for_range({0.0, 0.0}, QDtype::s8);
    EXPECT_GT(zero.scale, 0.0);
}

TEST(Observers, PerChannelWeightScalesMatchNaive) {
    at::manual_seed(3);
    const at::Tensor w = at::randn({5, 3, 2, 2});
    const auto scales = per_channel_weight_scales(w);
    ASSERT_EQ(scales.size(), 5u);
    for (int64_t c = 0; c < 5; ++c) {
        double top = 0.0;
        const at::Tensor wc = w[c].contiguous();
        for (int64_t i = 0; i < wc.numel(); ++i) top = std::max(top, std::abs(double(wc.data_ptr<float>()[i])));
        EXPECT_NEAR(scales[static_cast<size_t>(c)], top / 127.0, 1e-7);
    }
}

// Gaussian activations with a few large outliers: clipping them lowers the error.
at::Tensor with_outliers(uint64_t seed, bool relu) {
    at::manual_seed(seed);
    at::Tensor x = at::randn({20000});
    x.index_put_({at::arange(0, 5)}, 40.0);
    return relu ? x.clamp_min(0) : x;
}

TEST(Observers, HistogramL2BeatsMinMaxOnOutliers) {
    for (QDtype dtype : {QDtype::u8, QDtype::s8}) {
        const at::Tensor x = with_outliers(4, dtype == QDtype::u8);
        auto l2 = make_observer({ObserverKind::histogram_l2});
        auto mm = make_observer({ObserverKind::min_max});
        l2->observe(x);
        mm->observe(x);
        const Range r = l2->range(dtype);
        EXPECT_LT(r.max, 40.0);
        const double e_l2 = fake_quant_mse(x, qparams_for_range(r, dtype), dtype);
        const double e_mm = fake_quant_mse(x, qparams_for_range(mm->range(dtype), dtype), dtype);
        EXPECT_LT(e_l2, e_mm);
        // Near the best of a brute-force grid of upper bounds (naive search on the data).
        double best = 1e30;
        for (int k = 1; k <= 400; ++k) {
            const double hi = 40.0 * k / 400.0;
            const Range cand = dtype == QDtype::s8 ? Range{-hi, hi} : Range{0.0, hi};
            best = std::min(best, fake_quant_mse(x, qparams_for_range(cand, dtype), dtype));
        }
        EXPECT_LE(e_l2, best * 1.25) << qdtype_name(dtype);
    }
}

TEST(Observers, HistogramKlClipsOutliersButKeepsUniformRange) {
    const at::Tensor x = with_outliers(5, true);
    auto kl = make_observer({ObserverKind::histogram_kl});
    kl->observe(x);
    EXPECT_LT(kl->range(QDtype::u8).max, 20.0);
    EXPECT_LT(kl->range(QDtype::s8).max, 20.0);
    EXPECT_GT(kl->range(QDtype::u8).max, 2.0);

    at::manual_seed(6);
    const at::Tensor u = at::rand({50000}) * 3.0;
    auto klu = make_observer({ObserverKind::histogram_kl});
    klu->observe(u);
    EXPECT_NEAR(klu->range(QDtype::u8).max, 3.0, 0.15);
}

TEST(Observers, PercentileMatchesSortedQuantile) {
    ObserverParams params{ObserverKind::percentile};
    params.percentile = 99.0;
    auto obs = make_observer(params);
    at::Tensor all;
    for (const auto &b : batches(3, {4000}, 7)) {
        obs->observe(b);
        all = all.defined() ? at::cat({all, b}) : b;
    }
    const at::Tensor sorted = std::get<0>(all.sort());
    const auto n = sorted.numel();
    const double q_hi = sorted[static_cast<int64_t>(0.99 * (n - 1))].item<double>();
    const double q_lo = sorted[static_cast<int64_t>(0.01 * (n - 1))].item<double>();
    const double bin = (all.max().item<double>() - all.min().item<double>()) / params.bins;
    const Range r = obs->range(QDtype::u8);
    EXPECT_NEAR(r.max, q_hi, 3 * bin + 0.02);
    EXPECT_NEAR(r.min, q_lo, 3 * bin + 0.02);
    // Symmetric: the 99th percentile of |x|.
    const at::Tensor mags = std::get<0>(all.abs().sort());
    const double t = mags[static_cast<int64_t>(0.99 * (n - 1))].item<double>();
    EXPECT_NEAR(obs->range(QDtype::s8).max, t, 3 * bin + 0.02);
}

TEST(Observers, HistogramGrowsItsRangeAcrossBatches) {
    auto obs = make_observer({ObserverKind::percentile});
    obs->observe(at::rand({1000}));          // [0, 1)
    obs->observe(at::rand({1000}) * 10.0);   // [0, 10)
    ObserverParams p{ObserverKind::percentile};
    p.percentile = 100.0;
    auto full = make_observer(p);
    full->observe(at::rand({1000}));
    full->observe(at::rand({1000}) * 10.0 - 5.0);
    EXPECT_LT(full->range(QDtype::u8).min, -4.0);
    EXPECT_GT(full->range(QDtype::u8).max, 4.0);
}

TEST(Observers, NonFiniteValuesAreRejected) {
    auto obs = make_observer({ObserverKind::min_max});
    at::Tensor x = at::zeros({4});
    x[1] = std::numeric_limits<float>::infinity();
    EXPECT_THROW(obs->observe(x), c10::Error);
}

TEST(Observers, NamesRoundTrip) {
    for (ObserverKind k : {ObserverKind::min_max, ObserverKind::moving_average, ObserverKind::histogram_l2,
                           ObserverKind::histogram_kl, ObserverKind::percentile}) {
        ObserverKind back{};
        ASSERT_TRUE(parse_observer_name(observer_name(k), back));
        EXPECT_EQ(back, k);
    }
    ObserverKind dummy{};
    EXPECT_FALSE(parse_observer_name("minmax", dummy));
}

}  // namespace
}  // namespace ipex::quant
