#include "ops/rnn_context.h"

#include <sstream>

#include "ops/onednn_utils.h"
#include "ops/op_errors.h"

namespace ipex::ops {

using dnnl::memory;
using Tag = memory::format_tag;

namespace {

constexpr const char *kOp = "ipex rnn";

int64_t directions(const RnnParams &p) { return p.bidirectional ? 2 : 1; }
int64_t gate_count(const RnnParams &p) { return p.mode == "lstm" ? 4 : 3; }
// Bias rows per cell: the LSTM's four gates; the linear-before-reset GRU's three gates plus the
// hidden bias of its candidate gate.
constexpr int64_t kBiasGates = 4;

at::ScalarType math_type(const std::string &dtype) {
    if (dtype == "fp32") return at::kFloat;
    if (dtype == "bf16") return at::kBFloat16;
    TORCH_CHECK(false, kOp, ": unknown compute dtype '", dtype, "' (expected fp32 or bf16)");
}

// aten orders GRU gates r, z, n; oneDNN u (= z), r, o (= n). LSTM gates i, f, g, o match.
at::Tensor to_onednn_gates(const at::Tensor &t, const RnnParams &p) {
    const at::Tensor f = t.to(at::kFloat);
    if (p.mode == "lstm") return f;
    const auto chunks = f.chunk(3, 0);
    return at::cat({chunks[1], chunks[0], chunks[2]}, 0);
}

// The oneDNN bias [gates, H] of one cell from aten's b_ih and b_hh (flat slots base+2, base+3).
at::Tensor cell_bias(const RnnParams &p, const std::vector<at::Tensor> &weights, size_t base) {
    const int64_t hidden = p.hidden_size;
    if (!p.has_biases) return at::zeros({kBiasGates, hidden});
    const at::Tensor b_ih = to_onednn_gates(weights[base + 2], p).reshape({gate_count(p), hidden});
    const at::Tensor b_hh = to_onednn_gates(weights[base + 3], p).reshape({gate_count(p), hidden});
    if (p.mode == "lstm") return b_ih + b_hh;
    // u and r add both biases; the candidate takes b_in outside and b_hn inside r * (U h + b_hn).
    return at::cat({(b_ih + b_hh).slice(0, 0, 2), b_ih.slice(0, 2, 3), b_hh.slice(0, 2, 3)}, 0);
}

}  // namespace

struct RnnContext::Segment {
    int64_t first = 0, layers = 1, src_features = 0;
    std::shared_ptr<WeightCache> layer_weights, iter_weights;
    at::Tensor bias;  // [layers, D, bias gates, H] fp32
};

struct RnnContext::Entry {
    struct Step {
        dnnl::primitive primitive;
        memory::desc src_layer, src_iter, src_iter_c, bias, dst_layer, dst_iter, dst_iter_c, scratchpad;
        WeightCache::Packed layer_weights, iter_weights;
    };
    std::vector<Step> steps;  // one per segment
};

RnnContext::RnnContext(RnnParams params, std::vector<at::Tensor> weights, std::string dtype)
    : params_(std::move(params)), weights_(std::move(weights)), dtype_(std::move(dtype)) {
    check_rnn_params(kOp, params_, weights_);
    const at::ScalarType math = math_type(dtype_);
    const int64_t dirs = directions(params_), hidden = params_.hidden_size, gates = gate_count(params_);
    const int64_t per_cell = params_.has_biases ? 4 : 2;
    for (const auto &[first, layers] : segments()) {
        auto segment = std::make_shared<Segment>();
        segment->first = first;
        segment->layers = layers;
        segment->src_features = first == 0 ? params_.input_size : hidden * dirs;
        std::vector<at::Tensor> layer_w, iter_w, biases;
        for (int64_t l = first; l < first + layers; ++l) {
            for (int64_t d = 0; d < dirs; ++d) {
                const size_t base = static_cast<size_t>((l * dirs + d) * per_cell);
                layer_w.push_back(to_onednn_gates(weights_[base], params_));
                iter_w.push_back(to_onednn_gates(weights_[base + 1], params_));
                biases.push_back(cell_bias(params_, weights_, base));
            }
        }
        // aten's [G*H, in] per cell is oneDNN's ldgoi order; the logical dims are [l, d, in, g, o].
        const auto plain = [&](const std::vector<at::Tensor> &w, int64_t in) {
            return at::stack(w).reshape({segment->layers, dirs, gates, hidden, in}).to(math).contiguous().permute(
                {0, 1, 4, 2, 3});
        };
        segment->layer_weights = std::make_shared<WeightCache>(plain(layer_w, segment->src_features));
        segment->iter_weights = std::make_shared<WeightCache>(plain(iter_w, hidden));
        segment->bias = at::stack(biases).reshape({layers, dirs, kBiasGates, hidden}).contiguous();
        segments_.push_back(segment);
    }
    primitives_ = std::make_shared<PrimitiveCache<Entry>>();
}

std::vector<std::pair<int64_t, int64_t>> RnnContext::segments() const {
    const int64_t layers = params_.num_layers;
    std::vector<std::pair<int64_t, int64_t>> out;
    // A oneDNN stack feeds each direction's layer from the same direction below it, while aten
    // feeds both directions the concatenation: bidirectional stacks run layer by layer.
    if (params_.bidirectional) {
        for (int64_t l = 0; l < layers; ++l) out.emplace_back(l, 1);
        return out;
    }
    // One primitive needs one input width: the layers above the first take H features.
    if (params_.input_size == params_.hidden_size) return {{0, layers}};
    out.emplace_back(0, 1);
    if (layers > 1) out.emplace_back(1, layers - 1);
    return out;
}

std::shared_ptr<const RnnContext::Entry> RnnContext::entry_for(int64_t steps, int64_t batch) const {
    const CacheKey key{steps, batch};
    if (auto hit = primitives_->find(key)) return hit;

    const memory::data_type math = to_dnnl(math_type(dtype_));
    const memory::data_type f32 = memory::data_type::f32;
    const int64_t dirs = directions(params_), hidden = params_.hidden_size, gates = gate_count(params_);
    const Tag layout = params_.batch_first ? Tag::ntc : Tag::tnc;
    const auto direction = params_.bidirectional ? dnnl::rnn_direction::bidirectional_concat
                                                 : dnnl::rnn_direction::unidirectional_left2right;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

    auto entry = std::make_shared<Entry>();
    for (const auto &segment : segments_) {
        Entry::Step step;
        const int64_t layers = segment->layers;
        step.src_layer = memory::desc({steps, batch, segment->src_features}, math, layout);
        step.dst_layer = memory::desc({steps, batch, dirs * hidden}, math, layout);
        step.src_iter = step.dst_iter = memory::desc({layers, dirs, batch, hidden}, math, Tag::ldnc);
        if (is_lstm()) step.src_iter_c = step.dst_iter_c = memory::desc({layers, dirs, batch, hidden}, f32, Tag::ldnc);
        step.bias = memory::desc({layers, dirs, kBiasGates, hidden}, f32, Tag::ldgo);
        const memory::desc layer_md({layers, dirs, segment->src_features, gates, hidden}, math, Tag::any);
        const memory::desc iter_md({layers, dirs, hidden, gates, hidden}, math, Tag::any);
        try {
            if (is_lstm()) {
                dnnl::lstm_forward::desc desc(dnnl::prop_kind::forward_inference, direction, step.src_layer,
                                              step.src_iter, step.src_iter_c, layer_md, iter_md, step.bias,
                                              step.dst_layer, step.dst_iter, step.dst_iter_c);
                dnnl::lstm_forward::primitive_desc pd(desc, attr, cpu_engine());
                step.primitive = dnnl::lstm_forward(pd);
                step.layer_weights = segment->layer_weights->get(pd.weights_layer_desc());
                step.iter_weights = segment->iter_weights->get(pd.weights_iter_desc());
                step.scratchpad = pd.scratchpad_desc();
            } else {
                dnnl::lbr_gru_forward::desc desc(dnnl::prop_kind::forward_inference, direction, step.src_layer,
                                                 step.src_iter, layer_md, iter_md, step.bias, step.dst_layer,
                                                 step.dst_iter);
                dnnl::lbr_gru_forward::primitive_desc pd(desc, attr, cpu_engine());
                step.primitive = dnnl::lbr_gru_forward(pd);
                step.layer_weights = segment->layer_weights->get(pd.weights_layer_desc());
                step.iter_weights = segment->iter_weights->get(pd.weights_iter_desc());
                step.scratchpad = pd.scratchpad_desc();
            }
        } catch (const dnnl::error &e) {
            TORCH_CHECK(false, kOp, ": oneDNN has no ", dtype_, " implementation of ", describe(), " for ", steps,
                        " steps of batch ", batch, " on this CPU (", e.what(), ")");
        }
        entry->steps.push_back(std::move(step));
    }
    primitives_->put(key, entry);
    return entry;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> RnnContext::run(const at::Tensor &input, const at::Tensor &h0,
                                                               const at::Tensor &c0) const {
    IPEX_CHECK_INPUT(input.dim() == 3 && input.is_floating_point(), kOp,
                     ": expected a 3-D floating-point input, got ", input.dim(), "-D ", input.scalar_type());
    IPEX_CHECK_INPUT(input.size(2) == params_.input_size, kOp, ": expected ", params_.input_size,
                     " input features, got shape ", input.sizes());
    const int64_t steps = input.size(params_.batch_first ? 1 : 0);
    const int64_t batch = input.size(params_.batch_first ? 0 : 1);
    IPEX_CHECK_INPUT(steps > 0 && batch > 0, kOp, ": empty sequence or batch in input of shape ", input.sizes());
    const int64_t dirs = directions(params_), hidden = params_.hidden_size;
    const std::vector<int64_t> state_sizes{params_.num_layers * dirs, batch, hidden};
    const auto check_state = [&](const at::Tensor &t, const char *name) {
        if (!t.defined()) return;
        IPEX_CHECK_INPUT(t.sizes() == at::IntArrayRef(state_sizes) && t.is_floating_point(), kOp, ": expected ",
                         name, " of shape ", at::IntArrayRef(state_sizes), ", got ", t.sizes());
    };
    check_state(h0, "h0");
    if (is_lstm()) check_state(c0, "c0");

    const at::ScalarType math = math_type(dtype_);
    const auto math_options = at::TensorOptions().dtype(math);
    const auto f32_options = at::TensorOptions().dtype(at::kFloat);
    at::Tensor src = input.to(math).contiguous();
    const at::Tensor h_src = h0.defined() ? h0.to(math).contiguous() : at::zeros(state_sizes, math_options);
    const at::Tensor h_dst = at::empty(state_sizes, math_options);
    at::Tensor c_src, c_dst;
    if (is_lstm()) {
        c_src = c0.defined() ? c0.to(at::kFloat).contiguous() : at::zeros(state_sizes, f32_options);
        c_dst = at::empty(state_sizes, f32_options);
    }
    const std::vector<int64_t> dst_sizes = params_.batch_first ? std::vector<int64_t>{batch, steps, dirs * hidden}
                                                               : std::vector<int64_t>{steps, batch, dirs * hidden};
    const auto entry = entry_for(steps, batch);
    for (size_t s = 0; s < segments_.size(); ++s) {
        const Segment &segment = *segments_[s];
        const Entry::Step &step = entry->steps[s];
        const int64_t lo = segment.first * dirs, hi = (segment.first + segment.layers) * dirs;
        const at::Tensor dst = at::empty(dst_sizes, math_options);
        std::unordered_map<int, memory> args{
            {DNNL_ARG_SRC_LAYER, wrap(src, step.src_layer)},
            {DNNL_ARG_SRC_ITER, wrap(h_src.slice(0, lo, hi), step.src_iter)},
            {DNNL_ARG_WEIGHTS_LAYER, step.layer_weights.memory},
            {DNNL_ARG_WEIGHTS_ITER, step.iter_weights.memory},
            {DNNL_ARG_BIAS, wrap(segment.bias, step.bias)},
            {DNNL_ARG_DST_LAYER, wrap(dst, step.dst_layer)},
            {DNNL_ARG_DST_ITER, wrap(h_dst.slice(0, lo, hi), step.dst_iter)},
        };
        if (is_lstm()) {
            args.emplace(DNNL_ARG_SRC_ITER_C, wrap(c_src.slice(0, lo, hi), step.src_iter_c));
            args.emplace(DNNL_ARG_DST_ITER_C, wrap(c_dst.slice(0, lo, hi), step.dst_iter_c));
        }
        execute(step.primitive, step.scratchpad, std::move(args));
        src = dst;
    }
    const at::ScalarType out = input.scalar_type();
    return {src.to(out), h_dst.to(out), is_lstm() ? c_dst.to(out) : at::Tensor()};
}

RnnContext::State RnnContext::state() const {
    const RnnParams &p = params_;
    return State{kStateVersion, p.mode,
                 std::vector<int64_t>{p.input_size, p.hidden_size, p.num_layers, p.bidirectional, p.batch_first,
                                      p.has_biases},
                 weights_, dtype_};
}

c10::intrusive_ptr<RnnContext> RnnContext::from_state(State s) {
    TORCH_CHECK(std::get<0>(s) == kStateVersion, kOp, ": saved context version ", std::get<0>(s),
                " is not supported (expected ", kStateVersion, ")");
    const auto &ints = std::get<2>(s);
    TORCH_CHECK(ints.size() == 6, kOp, ": a saved context has ", ints.size(), " integer fields, expected 6");
    for (size_t i = 3; i < 6; ++i)
        TORCH_CHECK(ints[i] == 0 || ints[i] == 1, kOp, ": saved flag ", i, " is ", ints[i], ", expected 0 or 1");
    RnnParams p{std::get<1>(s), ints[0], ints[1], ints[2], ints[3] != 0, ints[4] != 0, ints[5] != 0};
    return c10::make_intrusive<RnnContext>(std::move(p), std::move(std::get<3>(s)), std::get<4>(s));
}

std::string RnnContext::describe() const {
    std::ostringstream out;
    out << params_.mode << " " << params_.input_size << "->" << params_.hidden_size << " x" << params_.num_layers
        << (params_.bidirectional ? " bidirectional" : "") << (params_.batch_first ? " batch_first" : "")
        << (params_.has_biases ? "" : " nobias") << " " << dtype_;
    return out.str();
}

}  // namespace ipex::ops
