// One projection of the decoder, y = x W^T + b, converted once at load into the form the
// runtime multiplies with: a oneDNN matmul reading the plain weight in place (fp32 or bf16,
// through lib/ops' LinearContext), or weight-only int4/int8 (lib/woq's woq_linear kernels).
// Projections that read the same input (q/k/v, gate/up) are merged into one weight; WOQ parts
// whose layouts differ (act-order GPTQ) are kept as parts writing to slices of one output.
// forward_add fuses the residual add: into the oneDNN primitive as a binary post-op, or
// into the output pass after the WOQ kernel. Steps of up to 8 rows skip oneDNN where a
// decode kernel applies: bf16 weights (Bf16Decode, reading the same plain weight) and int4
// with bf16 or int8 activations (Int4Decode, the tiled layout, which then serves prefill too and
// is the one copy of the weight). SmoothQuant W8A8 (llm/w8a8.h)
// is a third form: int8 weights and statically quantized int8 activations.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <string>
#include <vector>

#include "llm/bf16_decode.h"
#include "llm/int4_decode.h"
#include "llm/w8a8.h"
#include "ops/linear_context.h"
#include "checkpoint/woq_format.h"

namespace ipex::llm {

// How the weights are held and multiplied.
struct WeightFormat {
    std::string dtype = "bf16";   // dense: "fp32" | "bf16"
    int woq_bits = 0;             // 0: dense; 4 | 8: weight-only
    int64_t group_size = 0;     // -1: per output channel; 0: 128 where it divides, else per channel
    std::string lowp_mode = "bf16";  // WOQ activations: fp32 | bf16 | int8
    // SmoothQuant W8A8 (dense weights only): this projection's factors and activation scale.
    const W8A8Spec *w8a8 = nullptr;
    // Calibration: record per input channel max |x| of every call (observer()).
    bool observe = false;
    // Dense weights already in the math dtype are read in place (views of the mapped
    // checkpoint): from_dense holds several as parts instead of concatenating them.
    bool mapped = false;

    // The dtype dense weights are multiplied in.
    at::ScalarType math_type() const { return dtype == "fp32" ? at::kFloat : at::kBFloat16; }
};

class Linear {
public:
    // Dense weights [N, K] (any float dtype) and optional bias [N]; several are stacked
    // along N. With format.woq_bits, they are quantized on load (round to nearest).
    static Linear from_dense(const std::string &name, const std::vector<at::Tensor> &weights,
                             const std::vector<at::Tensor> &biases, const WeightFormat &format);
    // One dense weight [N, K] quantized round-to-nearest as `format` asks (format.woq_bits != 0),
    // with its group size resolved (0: 128 where it divides K, else per output channel).
    static woq::WoqLayer quantize(const std::string &name, const at::Tensor &weight, const at::Tensor &bias,
                                  const WeightFormat &format);
    // Whether int4 weights of this format are held in the tiled int4 layout alone (bf16 or int8
    // activations; not where AMX prefill reads lib/woq's form): from_dense then quantizes dense
    // parts straight into it.
    static bool int4_tiled_only(const WeightFormat &format);
    // The biases of parts of rows[i] output channels stacked into one fp32 [sum rows] (zeros
    // for a part without one), or undefined when none has one.
    static at::Tensor stacked_bias(const std::vector<at::Tensor> &biases, const std::vector<int64_t> &rows);
    // Already quantized layers (GPTQ/AWQ decoded by lib/woq), stacked along N.
    static Linear from_woq(const std::string &name, std::vector<woq::WoqLayer> layers, const std::string &lowp_mode);

    // fp32 [M, N].
    at::Tensor forward(const at::Tensor &x) const;
    // fp32 [M, N] = forward(x) + residual (fp32 [M, N]).
    at::Tensor forward_add(const at::Tensor &x, const at::Tensor &residual) const;
    // A merged gate/up projection (outputs [0, N/2) gate, [N/2, N) up): out (fp32 [M, N/2],
    // contiguous) = silu(gate) * up, fused into the decode kernel where it runs; with `gelu`,
    // gelu(tanh form)(gate) * up.
    void forward_glu(const at::Tensor &x, at::Tensor &out, bool gelu = false) const;

    // The tiled int4 layout when a step of `rows` rows runs on it with nothing else to apply (no
    // bias, no calibration observer), else null: Int4Decode::decode_jobs may then batch this
    // projection's step with others.
    const Int4Decode *int4_step(int64_t rows) const;
    // The bf16 decode kernel when a step of `rows` rows runs on it with nothing else to apply (no
    // calibration observer; its bias is the kernel's), else null: Bf16Decode::decode_jobs may
    // then batch this projection's step with others.
    const Bf16Decode *bf16_step(int64_t rows) const;

    // Whether forward_add fuses the residual into the product (else add it in the next pass).
    bool fuses_residual() const { return static_cast<bool>(dense_); }
    int64_t in_features() const { return in_; }
    int64_t out_features() const { return out_; }
    // Bytes of weights (and scales/zeros) one forward reads.
    uint64_t weight_bytes() const { return bytes_; }
    // Bytes held for this projection: the weight as read, every other layout of it (oneDNN's
    // packed copy where one was made, the int4 decode tiles) and the bias.
    uint64_t resident_bytes() const;
    const std::string &name() const { return name_; }
    std::string describe() const;
    // The calibration observer (WeightFormat::observe), else null.
    const std::shared_ptr<InputObserver> &observer() const { return observer_; }
    // The W8A8 form (WeightFormat::w8a8), else null.
    const std::shared_ptr<const W8A8Linear> &w8a8() const { return w8a8_; }

private:
    std::string name_;
    int64_t in_ = 0, out_ = 0;
    uint64_t bytes_ = 0;
    c10::intrusive_ptr<ops::LinearContext> dense_, dense_add_;
    // Dense parts held apart (WeightFormat::mapped), in output order; dense_ is then null.
    std::vector<c10::intrusive_ptr<ops::LinearContext>> dense_parts_;
    std::vector<woq::WoqLayer> woq_;  // parts in output order
    at::Tensor woq_bias_;             // fp32 [N] of all parts, or undefined
    std::string lowp_mode_;
    std::shared_ptr<const Int4Decode> decode_;  // int4, bf16 or int8 activations: the tiled layout
    std::shared_ptr<const Bf16Decode> bf16_decode_;  // bf16 dense: steps of few rows
    std::shared_ptr<const W8A8Linear> w8a8_;
    std::shared_ptr<InputObserver> observer_;
    void observe(const at::Tensor &x) const {
        if (observer_) observer_->observe(x);
    }
    bool bf16_decodes(const at::Tensor &x) const;
    // Whether x runs on the tiled int4 layout (decode_), all rows or a decode step.
    bool int4_tiled(const at::Tensor &x) const;
    // Whether the lib/woq layer is still held (no tiled layout, or prefill on AMX needs it).
    bool woq_layer_held() const;
    void build_decode();
};

}  // namespace ipex::llm
