// ipex int8 ops: a prepacked oneDNN int8 convolution (1-D/2-D/3-D) or linear (as a oneDNN
// matmul) on quint8 or qint8 activations. The s8 weight is reordered once into the layout oneDNN
// picks (format any); output scales (input scale x per-channel weight scale / output scale),
// source and destination zero points, a fused relu and a fused residual add (sum post-op
// with the other operand's scale and zero point, then an optional relu) are primitive
// attributes. Inputs are quint8 or qint8 tensors of any layout (the dtype the op was built
// for); outputs are quint8 or qint8 (convolutions channels-last), so consecutive int8 ops
// pass u8 or s8 data on directly, mixed as the qconfig says. Built on the ops runtime layer
// (engine, per-thread stream and scratchpad, ops::PrimitiveCache, one ops::WeightCache copy of
// the weights for every shape). Pickles to the fp32 weight and the numbers, so a saved model
// repacks on the CPU that loads it.
#pragma once

#include <ATen/ATen.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <torch/custom_class.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace ipex::ops {
class WeightCache;
struct PoolWindow;
}

namespace ipex::quant {

namespace stem {
struct Plan;
}
namespace pointwise {
struct Plan;
}

struct Int8Params {
    std::string kind;                 // conv1d conv2d conv3d linear
    std::vector<int64_t> stride, padding, dilation;
    int64_t groups = 1;
    double in_scale = 1.0, out_scale = 1.0;
    int64_t in_zero_point = 0, out_zero_point = 0;
    // Activation types: at::kQUInt8 (u8) or at::kQInt8 (s8), each on its own.
    at::ScalarType in_dtype = at::kQUInt8, out_dtype = at::kQUInt8, other_dtype = at::kQUInt8;
    bool relu = false;                // relu after the op (before a sum)
    bool sum = false;                 // add the second input (other_dtype): other_scale, other_zero_point
    double other_scale = 1.0;
    int64_t other_zero_point = 0;
    bool sum_relu = false;            // relu after the sum
    bool sum_in_place = false;        // write the result over the other operand (its last use)
};

// The factor the weights' scales are multiplied by inside the kernels of an op of `kind`
// ("linear", "conv2d", ...) taking activations of `in_dtype`: 1 on CPUs with VNNI (AVX512-VNNI,
// AVX-VNNI), whose u8 x s8 dot products sum exactly in 32 bits. Elsewhere oneDNN sums each pair
// of u8 x s8 products in 16 bits first (vpmaddubsw), which saturates when activations near 255
// meet weights near +-127, so weights are quantized to 7 bits (factor 2, |q| <= 64: every pair
// within 255 x 64 x 2 < 2^15), except for a convolution of s8 activations without groups, which
// oneDNN shifts to u8 and whose 8-bit weights it halves itself (int8_weights_halved_by_onednn).
// The saved state keeps the given scales either way.
double int8_weight_scale_factor(at::ScalarType in_dtype, const std::string &kind, int64_t groups);
bool int8_weights_halved_by_onednn(at::ScalarType in_dtype, const std::string &kind, int64_t groups);

class Int8Context : public torch::CustomClassHolder {
public:
    using State = std::tuple<int64_t, at::Tensor, c10::optional<at::Tensor>, std::vector<double>, std::string,
                             std::vector<int64_t>, std::vector<double>, std::vector<int64_t>>;
    // 2 records the activation dtypes in the last element; 1 (all u8) is still read.
    static constexpr int64_t kStateVersion = 2;

    // weight: fp32 in PyTorch layout ([O, I/G, k...] or [O, I]); weight_scales per O.
    Int8Context(at::Tensor weight, c10::optional<at::Tensor> bias, std::vector<double> weight_scales,
                Int8Params params);

    // input: params.in_dtype; other: params.other_dtype when params.sum. Returns
    // params.out_dtype with the output parameters.
    at::Tensor run(const at::Tensor &input, const c10::optional<at::Tensor> &other) const;

    // run() of a batched 4-D input for a convolution without a sum, written into the memory of
    // `out` (dense channels-last of the output's sizes, quint8 or qint8; its type, scale and zero
    // point are not read: a later sum in place may turn u8 bytes into s8 ones) and returned
    // there with the output's type, scale and zero point. How a graph op's part writes straight
    // into the whole batch's output.
    at::Tensor run_into(const at::Tensor &input, const at::Tensor &out) const;

    // The convolution and a 2-D max pooling of its output (`win`, aten's windows and sizes) in
    // one pass of the stem kernel (stem::run_max_pooled) where it runs the input's shape (as
    // own_kernel_for; a new shape is timed first); undefined where it does not (then run the
    // two ops). input: as run()'s, checked the same way.
    at::Tensor run_max_pooled(const at::Tensor &input, const ops::PoolWindow &win, bool ceil_mode) const;

    const Int8Params &params() const { return params_; }
    // A convolution's output sizes for a batched input of these sizes; empty for a linear, an
    // input of another rank or channels, or one too small (what ipex::int8_graph sizes by).
    std::vector<int64_t> output_sizes(at::IntArrayRef input) const;
    at::IntArrayRef weight_sizes() const { return weight_.sizes(); }  // PyTorch's layout
    // Which own kernel may run this convolution instead of oneDNN, on CPUs with AVX512-VNNI
    // unless IPEX_CONV_KERNELS=0: "stem" (int8_stem.h: 2-D, 1-4 input channels, no sum),
    // "pointwise" (int8_pointwise.h: 1x1, any stride, no padding, a multiple of 4 input
    // and 64 output channels, any post-ops), or "" (none). Each input shape takes the faster of the
    // kernel and oneDNN, timed on its first call (IPEX_CONV_KERNELS=1: the own kernel always).
    const char *own_kernel() const;
    // Whether the own kernel runs inputs of these sizes (channels-last): as timed on their
    // first call, or chosen by IPEX_CONV_KERNELS; false before they ran.
    bool own_kernel_for(at::IntArrayRef input_sizes) const;
    // Primitives cached (one per input shape, the last 16) and packed copies of the weights.
    size_t cached_shapes() const;
    size_t packed_layouts() const;
    std::string describe() const;
    State state() const;
    static c10::intrusive_ptr<Int8Context> from_state(State state);

    // Every field a context is built from (kind, weight rank, stride/padding/dilation/groups,
    // scales, zero points, bias), checked through ops/state_checks like the float contexts'.
    static void validate(const at::Tensor &weight, const c10::optional<at::Tensor> &bias,
                         const std::vector<double> &weight_scales, const Int8Params &params);

private:
    struct Entry;
    std::shared_ptr<const Entry> entry_for(const at::Tensor &src, const at::Tensor &dst) const;
    // The weight cache, made with `plain` (qweight_ in oneDNN's dims) at the first call.
    std::shared_ptr<ops::WeightCache> packed_weights(const dnnl::memory::desc &plain) const;
    // Runs the entry's primitive on src/dst with this op's zero points and bias.
    void execute_entry(const Entry &entry, const at::Tensor &src, const at::Tensor &dst) const;
    std::vector<int64_t> conv_output_sizes(at::IntArrayRef input) const;
    at::Tensor run_conv(const at::Tensor &input, const c10::optional<at::Tensor> &other) const;
    at::Tensor channels_last_input(const at::Tensor &input) const;
    // Throws (caller input) unless `input` is quantized as this op's input was prepacked for.
    void check_input(const at::Tensor &input) const;
    at::Tensor run_linear(const at::Tensor &input, const c10::optional<at::Tensor> &other) const;
    // Whether the own kernel runs src's shape into dst (timing both on the shape's first call,
    // into a scratch copy of dst); false where oneDNN is to run.
    bool own_chosen(const at::Tensor &src, const at::Tensor &dst) const;
    // The own kernel into dst where own_chosen; false where oneDNN is to run.
    bool run_own(const at::Tensor &src, const at::Tensor &dst) const;
    // The own kernel on src, written at out_bytes (dst's memory or a scratch copy of it; dst's
    // sizes are the output's).
    void run_own_kernel(const at::Tensor &src, const at::Tensor &dst, void *out_bytes) const;

    at::Tensor weight_;      // fp32, as given
    at::Tensor qweight_;     // s8, PyTorch layout (linear: [K, N] for the matmul)
    at::Tensor bias_;        // fp32 bias in accumulator units (bias / (in_scale * w_scale)), or undefined
    std::vector<double> weight_scales_;
    std::vector<float> output_scales_;
    Int8Params params_;
    std::shared_ptr<const stem::Plan> stem_;            // or null
    std::shared_ptr<const pointwise::Plan> pointwise_;  // or null (one of the two at most)
    bool own_always_ = false;                           // IPEX_CONV_KERNELS=1
    struct Cache;
    std::shared_ptr<Cache> cache_;
};

}  // namespace ipex::quant
