// Checks of an op's parameters shared by every op family (float convolutions and linears,
// int8 convolutions and linears). A saved model is untrusted input: each field is checked
// here before anything divides by it or indexes with it, and a failure throws c10::Error
// naming the op and the field (loading maps it to exit 3, "bad input file").
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace ipex::ops {

struct ConvParams {
    std::vector<int64_t> stride, padding, dilation, output_padding;
    int64_t groups = 1;
    bool transposed = false;
};

// A convolution weight ([O, I/G, k...]; transposed [I, O/G, k...]) against its parameters:
// rank 3-5, or exactly `rank` when the op's kind fixes it (conv2d: 4); one stride, padding,
// dilation and output_padding value per spatial dim (an empty output_padding means zeros),
// stride and dilation >= 1, padding >= 0, output_padding below stride or dilation; groups
// >= 1 and dividing the channels it splits; no empty dimension.
void check_conv_params(const char *op, const at::Tensor &weight, const ConvParams &params, int64_t rank = 0);

// A linear weight [O, I]: 2-D, no empty dimension.
void check_linear_weight(const char *op, const at::Tensor &weight);

// A bias of `channels` entries, when there is one.
void check_bias(const char *op, const c10::optional<at::Tensor> &bias, int64_t channels,
                const char *unit = "output channels");

// A per-tensor quantization of an activation: scale finite and > 0, zero point within the
// range of `dtype` (at::kQUInt8: 0..255, at::kQInt8: -128..127).
void check_quant_params(const char *op, const char *field, double scale, int64_t zero_point, at::ScalarType dtype);

// Per-channel scales: `channels` of them, each finite and > 0.
void check_scales(const char *op, const char *field, const std::vector<double> &scales, int64_t channels);

// A recurrent layer stack as aten::lstm/aten::gru describe it.
struct RnnParams {
    std::string mode;  // "lstm" or "gru"
    int64_t input_size = 0, hidden_size = 0, num_layers = 0;
    bool bidirectional = false, batch_first = false, has_biases = true;
};

// Largest layer count and feature size a saved recurrent context may claim.
constexpr int64_t kMaxRnnLayers = 64;
constexpr int64_t kMaxRnnFeatures = int64_t{1} << 20;

// The weights of an LSTM/GRU in aten's flat order (per layer, per direction: w_ih, w_hh and,
// with biases, b_ih, b_hh) against its parameters: mode known, sizes in range, one floating
// tensor of the right shape per slot ([G*H, in], [G*H, H], [G*H] with G = 4 or 3; `in` is
// input_size for layer 0, H times the directions above it).
void check_rnn_params(const char *op, const RnnParams &params, const std::vector<at::Tensor> &weights);

}  // namespace ipex::ops
