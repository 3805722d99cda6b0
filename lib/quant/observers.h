// Calibration observers: they watch the tensors a quantizable op reads and writes and turn
// what they saw into a range, then into int8 quantization parameters.
//   min_max         running min and max
//   moving_average  min and max averaged over batches (averaging constant c)
//   histogram       a histogram of the values; the range is searched for the least L2
//                   quantization error (histogram_l2) or the least KL divergence between
//                   the clipped and the quantized distribution (histogram_kl)
//   percentile      the p-th and (100-p)-th percentiles of the histogram
// Weights are quantized per output channel, symmetric int8; activations per tensor,
// u8 affine or s8 symmetric.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ipex::quant {

enum class ObserverKind { min_max, moving_average, histogram_l2, histogram_kl, percentile };

// Integer types of quantized tensors (activations: u8 or s8; weights: s8).
enum class QDtype { u8, s8 };

// Bounds of the numbers a parameter may take (also enforced by the qconfig loader).
constexpr int kMinBins = 16;
constexpr int kMaxBins = 1 << 16;
constexpr double kMinPercentile = 90.0;

struct ObserverParams {
    ObserverKind kind = ObserverKind::min_max;
    double averaging_constant = 0.01;  // moving_average: weight of the newest batch
    int bins = 2048;                    // histogram, percentile
    double percentile = 99.99;          // percentile: in [kMinPercentile, 100]
};

struct Range {
    double min = 0.0;
    double max = 0.0;
};

struct QParams {
    double scale = 1.0;
    int64_t zero_point = 0;
};

// Observes activations one batch at a time; range() is valid after one observe().
class Observer {
public:
    virtual ~Observer() = default;
    virtual void observe(const at::Tensor &values) = 0;
    // The chosen range for quantizing to `dtype` (symmetric types search |x|).
    virtual Range range(QDtype dtype) const = 0;
    bool seen() const { return seen_; }

protected:
    bool seen_ = false;
};

std::unique_ptr<Observer> make_observer(const ObserverParams &params);

// Names as used by the CLI and the qconfig ("min_max", "histogram_kl", ...).
const char *observer_name(ObserverKind kind);
// Parses a name; false when unknown.
bool parse_observer_name(const std::string &name, ObserverKind &kind);
const char *qdtype_name(QDtype dtype);
bool parse_qdtype_name(const std::string &name, QDtype &dtype);

// Smallest and largest integer of a type.
int64_t qmin(QDtype dtype);
int64_t qmax(QDtype dtype);

// Per-tensor parameters for a range: u8 affine (range widened to hold 0, zero point in
// [0, 255]) or s8 symmetric (zero point 0, scale max|x| / 127). A degenerate range gets
// the smallest positive scale kMinScale.
constexpr double kMinScale = 1e-8;
QParams qparams_for_range(const Range &range, QDtype dtype);

// Per-output-channel symmetric int8 scales of a weight (channel axis 0): max|w_c| / 127.
std::vector<double> per_channel_weight_scales(const at::Tensor &weight);

}  // namespace ipex::quant
