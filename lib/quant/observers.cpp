#include "quant/observers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ipex::quant {
namespace {

constexpr int64_t kU8Levels = 256;
constexpr int64_t kS8HalfLevels = 128;  // levels on one side of zero, symmetric s8

// min and max of a batch as doubles (NaNs make the whole batch unusable).
Range batch_range(const at::Tensor &values) {
    const at::Tensor v = values.detach().to(at::kFloat);
    TORCH_CHECK(v.numel() > 0, "observer: empty tensor");
    TORCH_CHECK(v.isfinite().all().item<bool>(), "observer: tensor holds NaN or infinity");
    const auto mm = at::aminmax(v);
    return {std::get<0>(mm).item<double>(), std::get<1>(mm).item<double>()};
}

class MinMaxObserver : public Observer {
public:
    void observe(const at::Tensor &values) override {
        const Range r = batch_range(values);
        if (!seen_) {
            range_ = r;
        } else {
            range_.min = std::min(range_.min, r.min);
            range_.max = std::max(range_.max, r.max);
        }
        seen_ = true;
    }
    Range range(QDtype) const override { return range_; }

private:
    Range range_;
};

class MovingAverageObserver : public Observer {
public:
    explicit MovingAverageObserver(double c) : c_(c) {}
    void observe(const at::Tensor &values) override {
        const Range r = batch_range(values);
        if (!seen_) {
            range_ = r;
        } else {
            range_.min += c_ * (r.min - range_.min);
            range_.max += c_ * (r.max - range_.max);
        }
        seen_ = true;
    }
    Range range(QDtype) const override { return range_; }

private:
    double c_;
    Range range_;
};

// A histogram over [lo, hi] with a fixed number of bins; it grows its range by
// re-binning old counts at their bin centres.
class Histogram {
public:
    explicit Histogram(int bins) : counts_(static_cast<size_t>(bins), 0.0) {}

    void add(const at::Tensor &values) {
        const at::Tensor v = values.detach().to(at::kFloat).contiguous();
        const Range r = batch_range(v);
        if (total_ == 0.0) {
            lo_ = r.min;
            hi_ = r.max;
        } else if (r.min < lo_ || r.max > hi_) {
            rebin(std::min(lo_, r.min), std::max(hi_, r.max));
        }
        if (hi_ <= lo_) hi_ = lo_ + kMinScale;
        const at::Tensor h = at::histc(v, static_cast<int64_t>(counts_.size()), lo_, hi_)
                                 .to(at::kDouble)
                                 .contiguous();
        const double *p = h.data_ptr<double>();
        for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += p[i];
        total_ += static_cast<double>(v.numel());
    }

    size_t bins() const { return counts_.size(); }
    double lo() const { return lo_; }
    double hi() const { return hi_; }
    double width() const { return (hi_ - lo_) / static_cast<double>(counts_.size()); }
    double center(size_t i) const { return lo_ + (static_cast<double>(i) + 0.5) * width(); }
    const std::vector<double> &counts() const { return counts_; }

    // Histogram of |x| over [0, max|x|] with the same number of bins.
    std::vector<double> magnitudes(double &top) const {
        top = std::max(std::abs(lo_), std::abs(hi_));
        std::vector<double> out(counts_.size(), 0.0);
        for (size_t i = 0; i < counts_.size(); ++i) {
            if (counts_[i] == 0.0) continue;
            const double x = std::abs(center(i));
            size_t j = top > 0 ? static_cast<size_t>(x / top * static_cast<double>(out.size())) : 0;
            out[std::min(j, out.size() - 1)] += counts_[i];
        }
        return out;
    }

private:
    void rebin(double lo, double hi) {
        std::vector<double> fresh(counts_.size(), 0.0);
        const double w = (hi - lo) / static_cast<double>(fresh.size());
        for (size_t i = 0; i < counts_.size(); ++i) {
            if (counts_[i] == 0.0) continue;
            auto j = static_cast<int64_t>((center(i) - lo) / w);
            j = std::clamp<int64_t>(j, 0, static_cast<int64_t>(fresh.size()) - 1);
            fresh[static_cast<size_t>(j)] += counts_[i];
        }
        counts_.swap(fresh);
        lo_ = lo;
        hi_ = hi;
    }

    std::vector<double> counts_;
    double lo_ = 0.0, hi_ = 0.0, total_ = 0.0;
};

// Prefix sums of count, count*x and count*x^2 over bin centres: the squared error of
// clipping a run of bins to one value in O(1).
class ClipError {
public:
    ClipError(const std::vector<double> &counts, double lo, double width) : lo_(lo), width_(width) {
        const size_t n = counts.size();
        c_.assign(n + 1, 0.0);
        cx_.assign(n + 1, 0.0);
        cxx_.assign(n + 1, 0.0);
        for (size_t i = 0; i < n; ++i) {
            const double x = lo + (static_cast<double>(i) + 0.5) * width;
            c_[i + 1] = c_[i] + counts[i];
            cx_[i + 1] = cx_[i] + counts[i] * x;
            cxx_[i + 1] = cxx_[i] + counts[i] * x * x;
        }
    }
    size_t bins() const { return c_.size() - 1; }
    // Bins whose centre lies below v: [0, first_at_or_above(v)).
    size_t first_at_or_above(double v) const {
        const double k = std::ceil((v - lo_) / width_ - 0.5);
        return static_cast<size_t>(std::clamp(k, 0.0, static_cast<double>(bins())));
    }
    // Sum over bins [a, b) of count * (x - v)^2.
    double squared(size_t a, size_t b, double v) const {
        const double c = c_[b] - c_[a], cx = cx_[b] - cx_[a], cxx = cxx_[b] - cxx_[a];
        return cxx - 2.0 * v * cx + v * v * c;
    }
    double count(size_t a, size_t b) const { return c_[b] - c_[a]; }

    // Expected squared error of quantizing to `levels` steps over [lo, hi]: clipping
    // outside, uniform rounding noise (step^2 / 12) inside.
    double error(double lo, double hi, int64_t levels) const {
        const size_t a = first_at_or_above(lo), b = std::max(a, first_at_or_above(hi));
        const double step = (hi - lo) / static_cast<double>(levels - 1);
        return squared(0, a, lo) + squared(b, bins(), hi) + count(a, b) * step * step / 12.0;
    }

private:
    double lo_, width_;
    std::vector<double> c_, cx_, cxx_;
};

// KL divergence between the clipped distribution of bins [0, end) (outliers folded into
// the last bin) and the quantization of the unclipped bins [0, end) into `levels` buckets:
// clipping costs where the outliers land, a wide range costs resolution.
double kl_for_end(const std::vector<double> &counts, size_t end, int64_t levels) {
    std::vector<double> p(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(end));
    for (size_t i = end; i < counts.size(); ++i) p[end - 1] += counts[i];
    std::vector<double> q(end, 0.0);
    const double per = static_cast<double>(end) / static_cast<double>(levels);
    for (int64_t k = 0; k < levels; ++k) {
        const auto a = static_cast<size_t>(std::floor(static_cast<double>(k) * per));
        const auto b = std::min(end, static_cast<size_t>(std::floor(static_cast<double>(k + 1) * per)));
        double mass = 0.0;
        size_t nonzero = 0;
        for (size_t i = a; i < b; ++i) {
            mass += counts[i];
            nonzero += counts[i] > 0;
        }
        for (size_t i = a; i < b; ++i)
            if (counts[i] > 0) q[i] = mass / static_cast<double>(nonzero);
    }
    // Outliers folded into the last bin also count in its quantized bucket.
    double p_total = 0.0, q_total = 0.0;
    for (size_t i = 0; i < end; ++i) {
        p_total += p[i];
        q_total += q[i];
    }
    if (p_total <= 0.0 || q_total <= 0.0) return 0.0;
    double kl = 0.0;
    for (size_t i = 0; i < end; ++i) {
        if (p[i] <= 0.0) continue;
        const double pi = p[i] / p_total;
        const double qi = std::max(q[i] / q_total, 1e-12);
        kl += pi * std::log(pi / qi);
    }
    return kl;
}

// Bin count [levels, n] minimizing the KL divergence (n when the histogram is coarser).
size_t best_kl_end(const std::vector<double> &counts, int64_t levels) {
    const size_t n = counts.size();
    if (n <= static_cast<size_t>(levels)) return n;
    size_t best = n;
    double best_kl = std::numeric_limits<double>::infinity();
    for (size_t end = static_cast<size_t>(levels); end <= n; ++end) {
        const double kl = kl_for_end(counts, end, levels);
        if (kl < best_kl) {
            best_kl = kl;
            best = end;
        }
    }
    return best;
}

double quantile(const std::vector<double> &counts, double lo, double width, double fraction) {
    double total = 0.0;
    for (double c : counts) total += c;
    const double target = fraction * total;
    double run = 0.0;
    for (size_t i = 0; i < counts.size(); ++i) {
        if (run + counts[i] >= target && counts[i] > 0) {
            const double within = (target - run) / counts[i];
            return lo + (static_cast<double>(i) + within) * width;
        }
        run += counts[i];
    }
    return lo + static_cast<double>(counts.size()) * width;
}

class HistogramObserver : public Observer {
public:
    explicit HistogramObserver(const ObserverParams &params) : params_(params), hist_(params.bins) {}

    void observe(const at::Tensor &values) override {
        hist_.add(values);
        seen_ = true;
    }

    Range range(QDtype dtype) const override {
        switch (params_.kind) {
        case ObserverKind::histogram_l2: return dtype == QDtype::s8 ? l2_symmetric() : l2_affine();
        case ObserverKind::histogram_kl: return dtype == QDtype::s8 ? kl_symmetric() : kl_affine();
        default: return percentile(dtype);
        }
    }

private:
    Range l2_affine() const {
        const ClipError err(hist_.counts(), hist_.lo(), hist_.width());
        // Shrink greedily from whichever end costs less, remembering the best range seen.
        size_t a = 0, b = hist_.bins();
        auto range_of = [&](size_t s, size_t e) {
            return Range{hist_.lo() + static_cast<double>(s) * hist_.width(),
                         hist_.lo() + static_cast<double>(e) * hist_.width()};
        };
        Range best = range_of(a, b);
        double best_err = err.error(best.min, best.max, kU8Levels);
        const size_t min_width = std::max<size_t>(1, hist_.bins() / 64);
        while (b - a > min_width) {
            const Range left = range_of(a + 1, b), right = range_of(a, b - 1);
            const double el = err.error(left.min, left.max, kU8Levels);
            const double er = err.error(right.min, right.max, kU8Levels);
            if (el <= er) ++a; else --b;
            const double e = std::min(el, er);
            if (e < best_err) {
                best_err = e;
                best = range_of(a, b);
            }
        }
        return best;
    }

    Range l2_symmetric() const {
        const ClipError err(hist_.counts(), hist_.lo(), hist_.width());
        const double top = std::max(std::abs(hist_.lo()), std::abs(hist_.hi()));
        const size_t steps = hist_.bins();
        double best_t = top, best_err = std::numeric_limits<double>::infinity();
        for (size_t k = steps; k >= 1; --k) {
            const double t = top * static_cast<double>(k) / static_cast<double>(steps);
            const double e = err.error(-t, t, 2 * kS8HalfLevels - 1);
            if (e < best_err) {
                best_err = e;
                best_t = t;
            }
        }
        return {-best_t, best_t};
    }

    Range kl_affine() const {
        // Upper end first (bins from the low end up), then the lower end with it fixed.
        const auto &c = hist_.counts();
        const size_t end = best_kl_end(c, kU8Levels);
        std::vector<double> reversed(c.rbegin() + static_cast<std::ptrdiff_t>(c.size() - end), c.rend());
        for (size_t i = end; i < c.size(); ++i) reversed[0] += c[i];
        const size_t start_from_top = best_kl_end(reversed, kU8Levels);
        const double w = hist_.width();
        return {hist_.lo() + static_cast<double>(end - start_from_top) * w,
                hist_.lo() + static_cast<double>(end) * w};
    }

    Range kl_symmetric() const {
        double top = 0.0;
        const std::vector<double> mags = hist_.magnitudes(top);
        const size_t end = best_kl_end(mags, kS8HalfLevels);
        const double t = top * static_cast<double>(end) / static_cast<double>(mags.size());
        return {-t, t};
    }

    Range percentile(QDtype dtype) const {
        const double p = params_.percentile / 100.0;
        if (dtype == QDtype::s8) {
            double top = 0.0;
            const std::vector<double> mags = hist_.magnitudes(top);
            const double t = quantile(mags, 0.0, top / static_cast<double>(mags.size()), p);
            return {-t, t};
        }
        return {quantile(hist_.counts(), hist_.lo(), hist_.width(), 1.0 - p),
                quantile(hist_.counts(), hist_.lo(), hist_.width(), p)};
    }

    ObserverParams params_;
    Histogram hist_;
};

}  // namespace

std::unique_ptr<Observer> make_observer(const ObserverParams &params) {
    switch (params.kind) {
    case ObserverKind::min_max: return std::make_unique<MinMaxObserver>();
    case ObserverKind::moving_average:
        return std::make_unique<MovingAverageObserver>(params.averaging_constant);
    default: return std::make_unique<HistogramObserver>(params);
    }
}

namespace {
const std::pair<ObserverKind, const char *> kObserverNames[] = {
    {ObserverKind::min_max, "min_max"},
    {ObserverKind::moving_average, "moving_average"},
    {ObserverKind::histogram_l2, "histogram_l2"},
    {ObserverKind::histogram_kl, "histogram_kl"},
    {ObserverKind::percentile, "percentile"},
};
}  // namespace

const char *observer_name(ObserverKind kind) {
    for (const auto &[k, name] : kObserverNames)
        if (k == kind) return name;
    return "unknown";
}

bool parse_observer_name(const std::string &name, ObserverKind &kind) {
    for (const auto &[k, n] : kObserverNames)
        if (name == n) {
            kind = k;
            return true;
        }
    return false;
}

const char *qdtype_name(QDtype dtype) { return dtype == QDtype::u8 ? "u8" : "s8"; }

bool parse_qdtype_name(const std::string &name, QDtype &dtype) {
    if (name == "u8") dtype = QDtype::u8;
    else if (name == "s8") dtype = QDtype::s8;
    else return false;
    return true;
}

int64_t qmin(QDtype dtype) { return dtype == QDtype::u8 ? 0 : -128; }
int64_t qmax(QDtype dtype) { return dtype == QDtype::u8 ? 255 : 127; }

QParams qparams_for_range(const Range &range, QDtype dtype) {
    QParams q;
    if (dtype == QDtype::s8) {
        const double t = std::max(std::abs(range.min), std::abs(range.max));
        q.scale = std::max(t / static_cast<double>(qmax(dtype)), kMinScale);
        q.zero_point = 0;
        return q;
    }
    const double lo = std::min(range.min, 0.0), hi = std::max(range.max, 0.0);
    q.scale = std::max((hi - lo) / static_cast<double>(qmax(dtype) - qmin(dtype)), kMinScale);
    q.zero_point = std::clamp<int64_t>(std::llround(-lo / q.scale), qmin(dtype), qmax(dtype));
    return q;
}

std::vector<double> per_channel_weight_scales(const at::Tensor &weight) {
    TORCH_CHECK(weight.dim() >= 1 && weight.size(0) > 0, "weight needs an output-channel axis");
    const at::Tensor flat = weight.detach().to(at::kDouble).reshape({weight.size(0), -1});
    const at::Tensor top = flat.abs().amax(1).contiguous();
    std::vector<double> scales(static_cast<size_t>(top.numel()));
    const double *p = top.data_ptr<double>();
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = std::max(p[i] / 127.0, kMinScale);
    return scales;
}

}  // namespace ipex::quant
