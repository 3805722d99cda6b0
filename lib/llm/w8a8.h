// SmoothQuant W8A8 for the decoder's projections (IPEX's static int8 LLM path): the weight,
// already multiplied by the smoothing factors s per input channel, held once as int8 per output
// channel (symmetric); activations quantized per tensor with a static scale (symmetric int8,
// after division by s where it was not folded into the preceding RMSNorm); an int8 x int8 ->
// fp32 oneDNN matmul with the activation scale x weight scales as output scales.
// InputObserver is the calibration side: per input channel max |x| of a projection's input.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ipex::llm {

// One projection's static int8 parameters, as a qconfig file gives them (llm/w8a8_config.h).
struct W8A8Spec {
    at::Tensor smooth;       // fp32 [in_features], s_j > 0
    double act_scale = 1.0;  // int8 step of the smoothed activation, > 0
    // The input is an RMSNorm's output whose weight takes 1/s (q/k/v, gate/up): the
    // activation is not divided here. Otherwise the quantize step divides by s.
    bool folded_into_norm = false;
};

class W8A8Linear {
public:
    // weight: fp32 [N, K], multiplied by s already; bias fp32 [N] or undefined; inv_smooth
    // fp32 [K] (1/s) where the quantize step applies it, else undefined.
    W8A8Linear(const std::string &name, const at::Tensor &weight, const at::Tensor &bias, double act_scale,
               const at::Tensor &inv_smooth);

    // x: fp32 or bf16 [M, K] -> fp32 [M, N].
    at::Tensor forward(const at::Tensor &x) const;
    // The int8 activation the matmul reads: clamp(round_half_even(x_j * multiplier_j), -127, 127).
    at::Tensor quantize_input(const at::Tensor &x) const;

    const at::Tensor &qweight() const { return qweight_; }              // int8 [N, K]
    const at::Tensor &weight_scales() const { return weight_scales_; }  // fp32 [N]
    const at::Tensor &multiplier() const { return multiplier_; }        // fp32 [K]: 1 / (s_j act_scale)
    const at::Tensor &bias() const { return bias_; }
    double act_scale() const { return act_scale_; }
    // The largest |q| of a weight: 127 on CPUs with VNNI, else 63 (lib/ops' int8 rule: without
    // VNNI oneDNN sums pairs of u8 x s8 products in 16 bits).
    int weight_max() const { return weight_max_; }
    uint64_t bytes() const;
    // "onednn <impl>" or "reference": what forward runs.
    std::string implementation() const;

private:
    struct Primitive;
    std::shared_ptr<const Primitive> primitive(int64_t rows) const;
    at::Tensor reference(const at::Tensor &q) const;

    std::string name_;
    at::Tensor qweight_, weight_scales_, multiplier_, bias_;
    std::vector<float> output_scales_;
    double act_scale_ = 1.0;
    int weight_max_ = 127;
    struct Cache;
    std::shared_ptr<Cache> cache_;
};

// Calibration: per input channel max |x| over every call, and the weight's per input channel
// max |W| (over all output rows of the merged projection). Thread safe.
class InputObserver {
public:
    InputObserver(std::string name, const at::Tensor &weight);
    void observe(const at::Tensor &x);
    const std::string &name() const { return name_; }
    std::vector<float> act_max() const;
    const std::vector<float> &weight_max() const { return weight_max_; }
    int64_t rows() const;

private:
    std::string name_;
    std::vector<float> weight_max_;
    mutable std::mutex mutex_;
    std::vector<float> act_max_;
    int64_t rows_ = 0;
};

}  // namespace ipex::llm
