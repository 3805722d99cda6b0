#include "ops/state_checks.h"

#include <algorithm>
#include <cmath>

namespace ipex::ops {
namespace {

void check_list(const char *op, const char *name, const std::vector<int64_t> &v, size_t n, int64_t min) {
    TORCH_CHECK(v.size() == n, op, ": ", name, " has ", v.size(), " values, the weight has ", n,
                " spatial dims");
    for (int64_t x : v) TORCH_CHECK(x >= min, op, ": ", name, " value ", x, " is below ", min);
}

void check_no_empty_dim(const char *op, const at::Tensor &weight) {
    for (int64_t i = 0; i < weight.dim(); ++i)
        TORCH_CHECK(weight.size(i) > 0, op, ": the weight of shape ", weight.sizes(), " has an empty dimension");
}

}  // namespace

void check_conv_params(const char *op, const at::Tensor &weight, const ConvParams &p, int64_t rank) {
    TORCH_CHECK(weight.defined() && weight.dim() >= 3 && weight.dim() <= 5, op,
                ": the weight must be 3-D to 5-D, got ", weight.defined() ? weight.dim() : 0, "-D");
    TORCH_CHECK(rank == 0 || weight.dim() == rank, op, ": the weight is ", weight.dim(), "-D, the op needs ",
                rank, "-D");
    TORCH_CHECK(weight.is_floating_point(), op, ": the weight must be floating point");
    check_no_empty_dim(op, weight);
    const size_t spatial = static_cast<size_t>(weight.dim() - 2);
    check_list(op, "stride", p.stride, spatial, 1);
    check_list(op, "padding", p.padding, spatial, 0);
    check_list(op, "dilation", p.dilation, spatial, 1);
    if (!p.output_padding.empty()) check_list(op, "output_padding", p.output_padding, spatial, 0);
    TORCH_CHECK(p.groups >= 1, op, ": groups is ", p.groups, ", must be >= 1");
    // Conv: O splits into groups; transposed: I splits (the weight holds O/G per group).
    const int64_t split = weight.size(0);
    TORCH_CHECK(split % p.groups == 0, op, ": ", split, " channels do not split into ", p.groups, " groups");
    if (p.transposed && !p.output_padding.empty())
        for (size_t i = 0; i < spatial; ++i)
            TORCH_CHECK(p.output_padding[i] < std::max(p.stride[i], p.dilation[i]), op,
                        ": output_padding must be smaller than stride or dilation");
    if (!p.transposed)
        TORCH_CHECK(p.output_padding.empty() ||
                        std::all_of(p.output_padding.begin(), p.output_padding.end(), [](int64_t x) { return x == 0; }),
                    op, ": output_padding applies to transposed convolutions only");
}

void check_linear_weight(const char *op, const at::Tensor &weight) {
    TORCH_CHECK(weight.defined() && weight.dim() == 2, op, ": the weight must be 2-D, got ",
                weight.defined() ? weight.dim() : 0, "-D");
    TORCH_CHECK(weight.is_floating_point(), op, ": the weight must be floating point");
    check_no_empty_dim(op, weight);
}

void check_bias(const char *op, const c10::optional<at::Tensor> &bias, int64_t channels, const char *unit) {
    if (!bias || !bias->defined()) return;
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == channels, op, ": bias of shape ", bias->sizes(),
                " does not match ", channels, " ", unit);
    TORCH_CHECK(bias->is_floating_point(), op, ": the bias must be floating point");
}

void check_quant_params(const char *op, const char *field, double scale, int64_t zero_point, at::ScalarType dtype) {
    TORCH_CHECK(dtype == at::kQUInt8 || dtype == at::kQInt8, op, ": ", field, " dtype ",
                static_cast<int>(dtype), " is not quint8 or qint8");
    TORCH_CHECK(std::isfinite(scale) && scale > 0, op, ": ", field, " scale ", scale,
                " must be a finite number above 0");
    const int64_t lo = dtype == at::kQUInt8 ? 0 : -128, hi = dtype == at::kQUInt8 ? 255 : 127;
    TORCH_CHECK(zero_point >= lo && zero_point <= hi, op, ": ", field, " zero point ", zero_point,
                " is out of range for ", dtype == at::kQUInt8 ? "u8" : "s8", " [", lo, ", ", hi, "]");
}

void check_scales(const char *op, const char *field, const std::vector<double> &scales, int64_t channels) {
    TORCH_CHECK(static_cast<int64_t>(scales.size()) == channels, op, ": ", scales.size(), " ", field, " for ",
                channels, " channels");
    for (size_t i = 0; i < scales.size(); ++i)
        TORCH_CHECK(std::isfinite(scales[i]) && scales[i] > 0, op, ": ", field, "[", i, "] = ", scales[i],
                    " must be a finite number above 0");
}

void check_rnn_params(const char *op, const RnnParams &p, const std::vector<at::Tensor> &weights) {
    TORCH_CHECK(p.mode == "lstm" || p.mode == "gru", op, ": unknown recurrent mode '", p.mode,
                "' (expected lstm or gru)");
    TORCH_CHECK(p.num_layers >= 1 && p.num_layers <= kMaxRnnLayers, op, ": num_layers is ", p.num_layers,
                ", must be 1 to ", kMaxRnnLayers);
    TORCH_CHECK(p.input_size >= 1 && p.input_size <= kMaxRnnFeatures, op, ": input_size is ", p.input_size,
                ", must be 1 to ", kMaxRnnFeatures);
    TORCH_CHECK(p.hidden_size >= 1 && p.hidden_size <= kMaxRnnFeatures, op, ": hidden_size is ", p.hidden_size,
                ", must be 1 to ", kMaxRnnFeatures);
    const int64_t directions = p.bidirectional ? 2 : 1;
    const int64_t per_cell = p.has_biases ? 4 : 2;
    const int64_t gates = p.mode == "lstm" ? 4 : 3;
    const size_t expected = static_cast<size_t>(p.num_layers * directions * per_cell);
    TORCH_CHECK(weights.size() == expected, op, ": ", weights.size(), " weight tensors, a ", p.num_layers,
                "-layer ", p.bidirectional ? "bidirectional " : "", p.mode, p.has_biases ? "" : " without biases",
                " has ", expected);
    const int64_t rows = gates * p.hidden_size;
    for (size_t i = 0; i < weights.size(); ++i) {
        const at::Tensor &w = weights[i];
        const int64_t layer = static_cast<int64_t>(i) / (directions * per_cell);
        const int64_t slot = static_cast<int64_t>(i) % per_cell;
        std::vector<int64_t> want{rows};
        if (slot == 0) want.push_back(layer == 0 ? p.input_size : p.hidden_size * directions);
        if (slot == 1) want.push_back(p.hidden_size);
        TORCH_CHECK(w.defined() && w.sizes() == at::IntArrayRef(want), op, ": weight ", i, " has shape ",
                    w.defined() ? w.sizes() : at::IntArrayRef{}, ", expected ", at::IntArrayRef(want));
        TORCH_CHECK(w.is_floating_point(), op, ": weight ", i, " must be floating point");
    }
}

}  // namespace ipex::ops
