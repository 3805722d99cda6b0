#include "llm/linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <sstream>

#include "base/errors.h"
#include "base/isa.h"
#include "llm/kernels.h"
#include "ops/linear_context.h"
#include "ops/woq/woq_linear.h"

namespace ipex::llm {
namespace {

// A merged layer from parts of one layout: rows (output channels) stacked.
bool stackable(const std::vector<woq::WoqLayer> &layers) {
    for (const auto &l : layers)
        if (l.act_order || l.bits != layers[0].bits || l.group_size != layers[0].group_size ||
            l.in_features != layers[0].in_features)
            return false;
    return true;
}

woq::WoqLayer stack(const std::string &name, const std::vector<woq::WoqLayer> &layers) {
    woq::WoqLayer out = layers[0];
    out.name = name;
    std::vector<at::Tensor> q, s, z;
    int64_t n = 0;
    for (const auto &l : layers) {
        q.push_back(l.qweight);
        s.push_back(l.scales);
        z.push_back(l.zeros);
        n += l.out_features;
    }
    out.qweight = at::cat(q, 0).contiguous();
    out.scales = at::cat(s, 0).contiguous();
    out.zeros = at::cat(z, 0).contiguous();
    out.out_features = n;
    out.bias = at::Tensor();
    return out;
}

}  // namespace

at::Tensor Linear::stacked_bias(const std::vector<at::Tensor> &biases, const std::vector<int64_t> &rows) {
    bool any = false;
    for (const auto &b : biases) any = any || b.defined();
    if (!any) return at::Tensor();
    std::vector<at::Tensor> parts;
    for (size_t i = 0; i < rows.size(); ++i)
        parts.push_back(i < biases.size() && biases[i].defined() ? biases[i].to(at::kFloat).reshape({-1})
                                                                 : at::zeros({rows[i]}, at::kFloat));
    return at::cat(parts, 0).contiguous();
}

namespace {
constexpr int64_t kDefaultGroup = 128;

// The group size a layer of k input channels is quantized with (-1: one per output channel).
int64_t resolved_group(const std::string &name, int64_t k, const WeightFormat &format) {
    const int64_t group = format.group_size;
    if (group == 0) return k % kDefaultGroup == 0 ? kDefaultGroup : -1;
    if (group > 0 && k % group != 0)
        throw_unsupported("--group-size " + std::to_string(group) + " does not divide the " + std::to_string(k) +
                          " input channels of '" + name + "' (use a divisor, or -1 for one group per output channel)");
    return group;
}
}  // namespace

bool Linear::int4_tiled_only(const WeightFormat &format) {
    return format.woq_bits == 4 && (format.lowp_mode == "bf16" || format.lowp_mode == "int8") &&
           !isa::amx_bf16_present();
}

woq::WoqLayer Linear::quantize(const std::string &name, const at::Tensor &weight, const at::Tensor &bias,
                               const WeightFormat &format) {
    const int64_t group = resolved_group(name, weight.size(1), format);
    return woq::quantize_rtn(name, weight, bias, format.woq_bits, group);  // fp32 by row blocks
}

Linear Linear::from_dense(const std::string &name, const std::vector<at::Tensor> &weights,
                          const std::vector<at::Tensor> &biases, const WeightFormat &format) {
    Linear l;
    l.name_ = name;
    std::vector<int64_t> rows;
    for (const auto &w : weights) rows.push_back(w.size(0));
    const at::Tensor bias = stacked_bias(biases, rows);
    if (format.woq_bits != 0) {
        // Quantized straight into the tiled layout: the same bytes as through the lib/woq layer.
        const int64_t group = resolved_group(name, weights[0].size(1), format);
        if (auto decode = int4_tiled_only(format) ? Int4Decode::quantize(weights, group, format.lowp_mode == "int8")
                                                  : nullptr) {
            const int64_t n = decode->out_features(), k = decode->in_features(), gs = group == -1 ? k : group;
            woq::WoqLayer meta;  // the layer's description; its tensors are the tiled layout's
            meta.name = name;
            meta.in_features = k;
            meta.out_features = n;
            meta.bits = 4;
            meta.group_size = gs;
            meta.source_group_size = group;
            l.woq_bias_ = bias.defined() ? bias.to(at::kFloat).contiguous() : bias;
            l.in_ = k;
            l.out_ = n;
            l.bytes_ = decode->bytes();
            l.woq_.push_back(std::move(meta));
            l.lowp_mode_ = format.lowp_mode;
            l.decode_ = std::move(decode);
            return l;
        }
        const at::Tensor w = weights.size() == 1 ? weights[0] : at::cat(weights, 0);
        woq::WoqLayer layer = quantize(name, w, bias, format);
        l.woq_bias_ = layer.bias;
        layer.bias = at::Tensor();
        l.in_ = layer.in_features;
        l.out_ = layer.out_features;
        l.bytes_ = layer.bytes();
        l.woq_.push_back(std::move(layer));
        l.lowp_mode_ = format.lowp_mode;
        l.build_decode();
        return l;
    }
    if (format.observe)
        l.observer_ = std::make_shared<InputObserver>(name, weights.size() == 1 ? weights[0] : at::cat(weights, 0));
    if (format.w8a8) {
        // W' = W diag(s): the smoothing moves to the weight; the int8 weight is the only copy.
        const W8A8Spec &spec = *format.w8a8;
        const at::Tensor w = (weights.size() == 1 ? weights[0] : at::cat(weights, 0)).to(at::kFloat) * spec.smooth.unsqueeze(0);
        const at::Tensor inv_smooth = spec.folded_into_norm ? at::Tensor() : spec.smooth.reciprocal();
        l.w8a8_ = std::make_shared<const W8A8Linear>(name, w, bias, spec.act_scale, inv_smooth);
        l.in_ = w.size(1);
        l.out_ = w.size(0);
        l.bytes_ = l.w8a8_->bytes();
        return l;
    }
    const at::ScalarType math = format.math_type();
    // Read in place (format.mapped): parts already in the math dtype are held as given, each
    // multiplied where it lies (a checkpoint's q/k/v stored apart, read from its mapping).
    bool as_parts = format.mapped && weights.size() > 1 && weights.size() <= kernels::kMaxWeightParts;
    for (const auto &w : weights) as_parts = as_parts && w.scalar_type() == math && w.is_contiguous();
    if (as_parts) {
        l.in_ = weights[0].size(1);
        for (const auto &w : weights) {
            const int64_t n = w.size(0);
            const c10::optional<at::Tensor> b =
                bias.defined() ? c10::optional<at::Tensor>(bias.narrow(0, l.out_, n).contiguous()) : c10::nullopt;
            l.dense_parts_.push_back(
                c10::make_intrusive<ops::LinearContext>(w, b, format.dtype, ops::PostOps{}, 1, /*weight_in_place=*/true));
            l.out_ += n;
            l.bytes_ += static_cast<uint64_t>(w.nbytes());
        }
        if (math == at::kBFloat16) l.bf16_decode_ = std::make_shared<const Bf16Decode>(weights, bias);
        return l;
    }
    std::vector<at::Tensor> cast;
    for (const auto &w : weights) cast.push_back(w.to(math));
    const at::Tensor w = cast.size() == 1 ? cast[0].contiguous() : at::cat(cast, 0);
    l.in_ = w.size(1);
    l.out_ = w.size(0);
    l.bytes_ = static_cast<uint64_t>(w.numel()) * w.element_size();
    const c10::optional<at::Tensor> b = bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt;
    // One resident copy: oneDNN reads the plain weight in place (its kernels copy blocks as
    // they go), which the decode kernel reads too.
    l.dense_ = c10::make_intrusive<ops::LinearContext>(w, b, format.dtype, ops::PostOps{}, 1, /*weight_in_place=*/true);
    l.dense_add_ = l.dense_->with_post_ops({ops::PostOp{"add", 0, 0}});
    // The decode kernel reads the same tensor the context holds as its plain weight.
    if (math == at::kBFloat16) l.bf16_decode_ = std::make_shared<const Bf16Decode>(w, bias);
    return l;
}

Linear Linear::from_woq(const std::string &name, std::vector<woq::WoqLayer> layers, const std::string &lowp_mode) {
    Linear l;
    l.name_ = name;
    l.lowp_mode_ = lowp_mode;
    std::vector<at::Tensor> biases;
    std::vector<int64_t> rows;
    for (auto &layer : layers) {
        biases.push_back(layer.bias);
        rows.push_back(layer.out_features);
        layer.bias = at::Tensor();
        l.out_ += layer.out_features;
        l.bytes_ += layer.bytes();
    }
    l.in_ = layers[0].in_features;
    l.woq_bias_ = stacked_bias(biases, rows);
    if (layers.size() > 1 && stackable(layers)) l.woq_.push_back(stack(name, layers));
    else l.woq_ = std::move(layers);
    l.build_decode();
    return l;
}

void Linear::build_decode() {
    if (woq_.size() != 1 || (lowp_mode_ != "bf16" && lowp_mode_ != "int8")) return;
    decode_ = Int4Decode::build(woq_[0], /*int8_activations=*/lowp_mode_ == "int8");
    // The tiled layout serves every row count: it is the one copy. Where the CPU has AMX,
    // prefill stays on lib/woq's AMX matmul path, which reads the plain layer.
    if (decode_ && !isa::amx_bf16_present()) {
        woq::WoqLayer &l = woq_[0];
        l.qweight = at::Tensor();
        l.scales = at::Tensor();
        l.zeros = at::Tensor();
        bytes_ = decode_->bytes();  // what a forward now reads
    }
}

bool Linear::woq_layer_held() const { return !woq_.empty() && woq_[0].qweight.defined(); }

bool Linear::int4_tiled(const at::Tensor &x) const {
    return decode_ && (!woq_layer_held() || (x.dim() == 2 && x.size(0) <= Int4Decode::kMaxRows));
}

const Int4Decode *Linear::int4_step(int64_t rows) const {
    const bool plain = decode_ && !woq_bias_.defined() && !observer_ && !w8a8_;
    return plain && rows >= 1 && rows <= Int4Decode::kMaxRows ? decode_.get() : nullptr;
}

const Bf16Decode *Linear::bf16_step(int64_t rows) const {
    const bool plain = bf16_decode_ && !observer_ && !w8a8_ && Bf16Decode::usable();
    return plain && rows >= 1 && rows <= Bf16Decode::kMaxRows ? bf16_decode_.get() : nullptr;
}

bool Linear::bf16_decodes(const at::Tensor &x) const {
    return bf16_decode_ && x.dim() == 2 && x.size(0) >= 1 && x.size(0) <= Bf16Decode::kMaxRows && Bf16Decode::usable();
}

at::Tensor Linear::forward(const at::Tensor &x) const {
    observe(x);
    if (w8a8_) return w8a8_->forward(x);
    if (bf16_decodes(x)) {
        at::Tensor out = at::empty({x.size(0), out_}, x.options().dtype(at::kFloat));
        bf16_decode_->run(x, out.data_ptr<float>(), out_);
        return out;
    }
    if (dense_) return dense_->run(x, c10::nullopt).to(at::kFloat);
    if (!dense_parts_.empty()) {
        std::vector<at::Tensor> outs;
        for (const auto &part : dense_parts_) outs.push_back(part->run(x, c10::nullopt).to(at::kFloat));
        return at::cat(outs, -1);
    }
    if (int4_tiled(x)) {
        at::Tensor out = at::empty({x.size(0), out_}, x.options().dtype(at::kFloat));
        decode_->run(x, out.data_ptr<float>(), out_);
        if (woq_bias_.defined()) out.add_(woq_bias_);
        return out;
    }
    const c10::optional<at::Tensor> none;
    at::Tensor out;
    if (woq_.size() == 1) {
        const auto &p = woq_[0];
        const c10::optional<at::Tensor> perm = p.perm.defined() ? c10::optional<at::Tensor>(p.perm) : none;
        out = woq::woq_linear(x, p.qweight, p.scales, p.zeros, none, perm, p.bits, p.group_size, p.in_features,
                              lowp_mode_)
                  .to(at::kFloat);
    } else {
        std::vector<at::Tensor> parts;
        for (const auto &p : woq_) {
            const c10::optional<at::Tensor> perm = p.perm.defined() ? c10::optional<at::Tensor>(p.perm) : none;
            parts.push_back(woq::woq_linear(x, p.qweight, p.scales, p.zeros, none, perm, p.bits, p.group_size,
                                            p.in_features, lowp_mode_)
                                .to(at::kFloat));
        }
        out = at::cat(parts, -1);
    }
    if (woq_bias_.defined()) out.add_(woq_bias_);
    return out;
}

at::Tensor Linear::forward_add(const at::Tensor &x, const at::Tensor &residual) const {
    if (!dense_) {
        at::Tensor out = forward(x);
        out.add_(residual);
        return out;
    }
    observe(x);
    if (bf16_decodes(x) && residual.scalar_type() == at::kFloat && residual.dim() == 2 &&
        residual.size(0) == x.size(0) && residual.size(1) == out_) {
        const at::Tensor res = residual.contiguous();
        at::Tensor out = at::empty({x.size(0), out_}, x.options().dtype(at::kFloat));
        bf16_decode_->run(x, out.data_ptr<float>(), out_, res.data_ptr<float>(), out_);
        return out;
    }
    return dense_add_->run(x, residual).to(at::kFloat);
}

void Linear::forward_glu(const at::Tensor &x, at::Tensor &out, bool gelu) const {
    const int64_t inter = out_ / 2;
    TORCH_INTERNAL_ASSERT(out_ % 2 == 0 && out.scalar_type() == at::kFloat && out.is_contiguous() &&
                              out.size(0) == x.size(0) && out.size(1) == inter,
                          "forward_glu: out must be fp32 [rows, N/2]");
    if (!gelu && bf16_decodes(x)) {
        observe(x);
        bf16_decode_->run_silu_mul(x, out.data_ptr<float>(), inter);
        return;
    }
    const at::Tensor gu = forward(x).contiguous();
    at::parallel_for(0, x.size(0), 4, [&](int64_t r0, int64_t r1) {
        const float *src = gu.data_ptr<float>() + r0 * 2 * inter;
        float *dst = out.data_ptr<float>() + r0 * inter;
        if (gelu) kernels::gelu_tanh_mul(src, dst, r1 - r0, inter);
        else kernels::silu_mul(src, dst, r1 - r0, inter);
    });
}

uint64_t Linear::resident_bytes() const {
    uint64_t bytes = woq_bias_.defined() ? woq_bias_.nbytes() : 0;
    if (!decode_ || woq_layer_held()) bytes += bytes_;
    if (dense_) bytes += static_cast<uint64_t>(dense_->packed_bytes());
    for (const auto &part : dense_parts_) bytes += static_cast<uint64_t>(part->packed_bytes());
    if (decode_) bytes += decode_->bytes();
    return bytes;
}

std::string Linear::describe() const {
    std::ostringstream s;
    s << name_ << " " << in_ << "->" << out_;
    if (dense_) s << " " << dense_->dtype();
    else if (!dense_parts_.empty()) s << " " << dense_parts_[0]->dtype() << " (" << dense_parts_.size() << " parts)";
    else if (w8a8_) s << " w8a8 (" << w8a8_->implementation() << ")";
    else s << " int" << woq_[0].bits << " g" << woq_[0].group_size << " " << lowp_mode_ << " (" << woq_.size() << " part"
           << (woq_.size() > 1 ? "s)" : ")");
    return s.str();
}

}  // namespace ipex::llm
