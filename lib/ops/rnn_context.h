// A prepacked LSTM or GRU stack (aten::lstm / aten::gru semantics: multi-layer, bidirectional,
// batch_first, with or without biases and initial states) on oneDNN's RNN primitives
// (lstm_forward; lbr_gru_forward, whose formula is PyTorch's GRU). Weights are reordered into
// oneDNN's preferred layout once; primitives are cached per (sequence length, batch). Pickles
// to the plain weights in aten's flat order.
#pragma once

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ops/primitive_cache.h"
#include "ops/state_checks.h"
#include "ops/weight_cache.h"

namespace ipex::ops {

class RnnContext : public torch::CustomClassHolder {
public:
    // version, mode, {input_size, hidden_size, num_layers, bidirectional, batch_first,
    // has_biases}, weights in aten's flat order, dtype.
    using State = std::tuple<int64_t, std::string, std::vector<int64_t>, std::vector<at::Tensor>, std::string>;
    static constexpr int64_t kStateVersion = 1;

    // `dtype` is "fp32" or "bf16" (weights and math in bf16, the cell state in fp32).
    RnnContext(RnnParams params, std::vector<at::Tensor> weights, std::string dtype);

    // output [T, N, D*H] (batch_first: [N, T, D*H]), h_n [L*D, N, H] and, for an LSTM, c_n;
    // all in the input's dtype. Undefined h0/c0 mean zeros.
    std::tuple<at::Tensor, at::Tensor, at::Tensor> run(const at::Tensor &input, const at::Tensor &h0,
                                                       const at::Tensor &c0) const;

    State state() const;
    static c10::intrusive_ptr<RnnContext> from_state(State state);

    const RnnParams &params() const { return params_; }
    const std::string &dtype() const { return dtype_; }
    bool is_lstm() const { return params_.mode == "lstm"; }
    std::string describe() const;
    size_t cached_shapes() const { return primitives_->size(); }
    // Layers that run as one oneDNN primitive each: [first layer, layer count].
    std::vector<std::pair<int64_t, int64_t>> segments() const;

private:
    struct Segment;
    struct Entry;
    std::shared_ptr<const Entry> entry_for(int64_t steps, int64_t batch) const;

    RnnParams params_;
    std::vector<at::Tensor> weights_;
    std::string dtype_;
    std::vector<std::shared_ptr<Segment>> segments_;
    std::shared_ptr<PrimitiveCache<Entry>> primitives_;
};

}  // namespace ipex::ops
