#include "ops/int8/int8_context.h"

#include <ATen/quantized/Quantizer.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>

#include "base/isa.h"
#include "ops/onednn_utils.h"
#include "ops/own_kernels.h"
#include "ops/op_errors.h"
#include "ops/pool_op.h"
#include "ops/primitive_cache.h"
#include "ops/state_checks.h"
#include "ops/weight_cache.h"
#include "ops/int8/int8_pointwise.h"
#include "ops/int8/int8_quantize.h"
#include "ops/int8/int8_stem.h"

namespace ipex::quant {

using dnnl::memory;
using ipex::ops::cpu_engine;

struct Int8Context::Entry {
    dnnl::primitive primitive;
    memory::desc src, weights, dst, bias, scratchpad;
    ops::WeightCache::Packed packed;  // the weights in this primitive's layout
    // The arguments every call passes the same (weights, bias, zero points), made once: a call
    // adds its source and destination (a call made them all, 3.6 us of a 1-pixel convolution).
    at::Tensor zero_points;  // s32 [source's, destination's]
    std::unordered_map<int, memory> constant_args;
};

struct Int8Context::Cache {
    ops::PrimitiveCache<Entry> primitives;
    // Per input shape: whether the own kernel (stem_ or pointwise_) was the faster.
    ops::PrimitiveCache<bool> own_choices;
    // The packed weights, shared by every shape (ops::WeightCache::prefer_packed); made at the
    // first primitive, when the plain layout is known.
    std::mutex weights_mutex;
    std::shared_ptr<ops::WeightCache> weights;
};

namespace {

constexpr int kPerChannelMask = 1 << 1;  // output-channel axis of conv dst / matmul dst

memory::desc any_desc(const std::vector<int64_t> &dims, memory::data_type type) {
    return memory::desc(ops::to_dims(dims), type, memory::format_tag::any);
}

memory::data_type dnnl_type(at::ScalarType t) {
    return t == at::kQInt8 ? memory::data_type::s8 : memory::data_type::u8;
}

dnnl::primitive_attr make_attr(const Int8Params &p, const std::vector<float> &scales) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_output_scales(kPerChannelMask, scales);
    // Zero points only where they are not 0 (post-relu activations): kernels with a source
    // zero point carry a compensation term.
    if (p.in_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (p.out_zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::post_ops ops;
    if (p.relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    if (p.sum) {
        // The other operand is copied into dst as it is: the sum reads it in its own type.
        ops.append_sum(static_cast<float>(p.other_scale / p.out_scale), static_cast<int32_t>(p.other_zero_point),
                       dnnl_type(p.other_dtype));
        if (p.sum_relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    }
    attr.set_post_ops(ops);
    return attr;
}

at::Tensor empty_q8(const std::vector<int64_t> &sizes, at::ScalarType dtype, double scale, int64_t zp,
                   bool channels_last) {
    const auto options = at::TensorOptions().dtype(dtype);
    at::MemoryFormat format = at::MemoryFormat::Contiguous;
    if (channels_last && sizes.size() == 4) format = at::MemoryFormat::ChannelsLast;
    if (channels_last && sizes.size() == 5) format = at::MemoryFormat::ChannelsLast3d;
    if (channels_last && sizes.size() == 3)  // NWC: allocate N, W, C and view as N, C, W
        return at::_empty_affine_quantized({sizes[0], sizes[2], sizes[1]}, options, scale, zp).transpose(1, 2);
    return at::_empty_affine_quantized(sizes, options, scale, zp, format);
}

void q8_check(const at::Tensor &t, at::ScalarType expected, const char *what) {
    IPEX_CHECK_INPUT(t.is_quantized() && t.scalar_type() == expected && t.qscheme() == at::kPerTensorAffine,
                "ipex int8 op: ", what, " must be a ", c10::toString(expected),
                " per-tensor quantized tensor (got ", t.toString(), ")");
}

// A channels-last tensor is described by its tag: with one channel its strides would also
// read as NCHW, a layout oneDNN's int8 kernels do not take.
memory::desc q8_desc(const at::Tensor &t) {
    static const memory::format_tag kChannelsLast[] = {memory::format_tag::nwc, memory::format_tag::nhwc,
                                                      memory::format_tag::ndhwc};
    const memory::data_type type = dnnl_type(t.scalar_type());
    if (t.dim() >= 3 && t.dim() <= 5 && ops::is_channels_last(t))
        return memory::desc(ops::to_dims(t.sizes()), type, kChannelsLast[t.dim() - 3]);
    return memory::desc(ops::to_dims(t.sizes()), type, ops::to_dims(t.strides()));
}

}  // namespace

// The sum post-op reads dst before writing it: the other operand's int8 values go there first.
static void copy_other(const Int8Context &ctx, const c10::optional<at::Tensor> &other, at::Tensor &dst) {
    const Int8Params &p = ctx.params();
    TORCH_CHECK(other.has_value(), "ipex int8 ", p.kind, ": the fused add needs its other operand");
    q8_check(*other, p.other_dtype, "the other operand");
    IPEX_CHECK_INPUT(other->numel() == dst.numel() && (other->dim() != dst.dim() || other->sizes() == dst.sizes()),
                "ipex int8 ", p.kind, ": the fused add's other operand has shape ", other->sizes(),
                ", the output ", dst.sizes());
    IPEX_CHECK_INPUT(std::abs(other->q_scale() - p.other_scale) <= 1e-6 * p.other_scale &&
                    other->q_zero_point() == p.other_zero_point,
                "ipex int8 ", p.kind, ": the add's other operand has scale ", other->q_scale(), " zero point ",
                other->q_zero_point(), ", the op was prepacked for ", p.other_scale, " / ", p.other_zero_point);
    at::Tensor raw = at::from_blob(dst.data_ptr(), dst.sizes(), dst.strides(), at::TensorOptions().dtype(at::kByte));
    const at::Tensor src = at::from_blob(other->data_ptr(), other->sizes(), other->strides(),
                                         at::TensorOptions().dtype(at::kByte));
    raw.copy_(src.reshape(dst.sizes()));
}

bool int8_weights_halved_by_onednn(at::ScalarType in_dtype, const std::string &kind, int64_t groups) {
    return !isa::vnni() && in_dtype == at::kQInt8 && kind != "linear" && groups == 1;
}

double int8_weight_scale_factor(at::ScalarType in_dtype, const std::string &kind, int64_t groups) {
    return isa::vnni() || int8_weights_halved_by_onednn(in_dtype, kind, groups) ? 1.0 : 2.0;
}

Int8Context::Int8Context(at::Tensor weight, c10::optional<at::Tensor> bias, std::vector<double> weight_scales,
                         Int8Params params)
    : weight_(weight.to(at::kFloat).contiguous()),
      weight_scales_(std::move(weight_scales)),
      params_(std::move(params)),
      cache_(std::make_shared<Cache>()) {
    validate(weight_, bias, weight_scales_, params_);
    const bool linear = params_.kind == "linear";
    const int64_t out_channels = weight_.size(0);
    const double factor = int8_weight_scale_factor(params_.in_dtype, params_.kind, params_.groups);
    const at::Tensor s = at::tensor(weight_scales_, at::TensorOptions().dtype(at::kDouble)) * factor;
    const at::Tensor zp = at::zeros({out_channels}, at::TensorOptions().dtype(at::kLong));
    at::Tensor q = at::quantize_per_channel(weight_, s, zp, 0, at::kQInt8).int_repr();  // int8 values
    qweight_ = linear ? q.t().contiguous() : q.contiguous();
    for (double ws : weight_scales_)
        output_scales_.push_back(static_cast<float>(params_.in_scale * ws * factor / params_.out_scale));
    if (bias && bias->defined()) {
        bias_ = (bias->to(at::kDouble) / (s * params_.in_scale)).to(at::kFloat).contiguous();
    }
    const auto choice = ops::own_kernels::choice_from_env(std::getenv(ops::own_kernels::kChoiceVariable));
    if (params_.kind != "conv2d" || choice == ops::own_kernels::Choice::onednn || !stem::available()) return;
    own_always_ = choice == ops::own_kernels::Choice::own;
    const bool in_s8 = params_.in_dtype == at::kQInt8, out_s8 = params_.out_dtype == at::kQInt8;
    if (!params_.sum &&
        stem::fits(weight_.size(1), weight_.size(2), weight_.size(3), params_.groups, params_.dilation)) {
        stem_ = std::make_shared<const stem::Plan>(stem::make_plan(qweight_, bias_, output_scales_, params_.stride,
                                                                   params_.padding, params_.relu, in_s8,
                                                                   params_.in_zero_point, out_s8,
                                                                   params_.out_zero_point));
    } else if (pointwise::fits(weight_.size(1), weight_.size(0), weight_.sizes().slice(2), params_.stride,
                               params_.padding, params_.dilation, params_.groups)) {
        vnni::Epilogue e;
        e.relu = params_.relu;
        e.sum = params_.sum;
        e.sum_s8 = params_.other_dtype == at::kQInt8;
        e.sum_relu = params_.sum_relu;
        e.out_s8 = out_s8;
        e.sum_scale = static_cast<float>(params_.other_scale / params_.out_scale);
        e.sum_shift = -e.sum_scale * static_cast<float>(params_.other_zero_point);
        e.out_zero_point = static_cast<float>(params_.out_zero_point);
        pointwise_ = std::make_shared<const pointwise::Plan>(
            pointwise::make_plan(qweight_, bias_, output_scales_, params_.stride, in_s8, params_.in_zero_point, e));
    }
}

void Int8Context::validate(const at::Tensor &weight, const c10::optional<at::Tensor> &bias,
                           const std::vector<double> &weight_scales, const Int8Params &p) {
    static const char *kOp = "ipex int8 op";
    const bool linear = p.kind == "linear";
    int64_t rank = 0;
    if (p.kind == "conv1d") rank = 3;
    if (p.kind == "conv2d") rank = 4;
    if (p.kind == "conv3d") rank = 5;
    TORCH_CHECK(linear || rank > 0, kOp, ": unknown kind '", p.kind, "' (conv1d, conv2d, conv3d, linear)");
    if (linear) {
        ops::check_linear_weight(kOp, weight);
        TORCH_CHECK(p.stride.empty() && p.padding.empty() && p.dilation.empty() && p.groups == 1, kOp,
                    ": a linear has no stride, padding, dilation or groups");
    } else {
        ops::check_conv_params(kOp, weight, ops::ConvParams{p.stride, p.padding, p.dilation, {}, p.groups, false},
                               rank);
    }
    const int64_t out_channels = weight.size(0);
    ops::check_scales(kOp, "weight scales", weight_scales, out_channels);
    ops::check_bias(kOp, bias, out_channels);
    ops::check_quant_params(kOp, "input", p.in_scale, p.in_zero_point, p.in_dtype);
    ops::check_quant_params(kOp, "output", p.out_scale, p.out_zero_point, p.out_dtype);
    if (p.sum) ops::check_quant_params(kOp, "add operand", p.other_scale, p.other_zero_point, p.other_dtype);
    TORCH_CHECK(p.sum || !(p.sum_relu || p.sum_in_place), kOp, ": sum_relu or sum_in_place set without a sum");
}

std::vector<int64_t> Int8Context::conv_output_sizes(at::IntArrayRef input) const {
    const int64_t spatial = weight_.dim() - 2;
    IPEX_CHECK_INPUT(static_cast<int64_t>(input.size()) == spatial + 2, "ipex int8 ", params_.kind, ": input rank ",
                input.size(), ", expected ", spatial + 2);
    IPEX_CHECK_INPUT(input[1] == weight_.size(1) * params_.groups, "ipex int8 ", params_.kind, ": input has ", input[1],
                " channels, expected ", weight_.size(1) * params_.groups);
    std::vector<int64_t> out = output_sizes(input);
    IPEX_CHECK_INPUT(!out.empty(), "ipex int8 ", params_.kind, ": input too small");
    return out;
}

std::vector<int64_t> Int8Context::output_sizes(at::IntArrayRef input) const {
    const int64_t spatial = weight_.dim() - 2;
    if (params_.kind == "linear" || static_cast<int64_t>(input.size()) != spatial + 2 ||
        input[1] != weight_.size(1) * params_.groups)
        return {};
    std::vector<int64_t> out{input[0], weight_.size(0)};
    for (int64_t d = 0; d < spatial; ++d) {
        const int64_t k = params_.dilation[d] * (weight_.size(d + 2) - 1) + 1;
        const int64_t o = (input[d + 2] + 2 * params_.padding[d] - k) / params_.stride[d] + 1;
        if (o <= 0) return {};
        out.push_back(o);
    }
    return out;
}

std::shared_ptr<ops::WeightCache> Int8Context::packed_weights(const memory::desc &plain) const {
    std::lock_guard<std::mutex> lock(cache_->weights_mutex);
    if (!cache_->weights) cache_->weights = std::make_shared<ops::WeightCache>(qweight_, plain);
    return cache_->weights;
}

size_t Int8Context::packed_layouts() const {
    std::lock_guard<std::mutex> lock(cache_->weights_mutex);
    return cache_->weights ? cache_->weights->layouts() : 0;
}

size_t Int8Context::cached_shapes() const { return cache_->primitives.size(); }

std::shared_ptr<const Int8Context::Entry> Int8Context::entry_for(const at::Tensor &src,
                                                                 const at::Tensor &dst) const {
    ops::CacheKey key = src.sizes().vec();
    key.push_back(-1);  // sizes, then strides
    key.insert(key.end(), src.strides().begin(), src.strides().end());
    if (auto hit = cache_->primitives.find(key)) return hit;

    auto entry = std::make_shared<Entry>();
    const dnnl::primitive_attr attr = make_attr(params_, output_scales_);
    const memory::desc src_md = q8_desc(src);
    const memory::desc bias_md = bias_.defined()
                                     ? memory::desc({bias_.numel()}, memory::data_type::f32, memory::format_tag::x)
                                     : memory::desc();
    if (params_.kind == "linear") {
        const int64_t k = qweight_.size(0), n = qweight_.size(1);
        const memory::desc w_any = any_desc({k, n}, memory::data_type::s8);
        const memory::desc dst_md = q8_desc(dst);
        const memory::desc bias2 =
            bias_.defined() ? memory::desc({1, n}, memory::data_type::f32, memory::format_tag::ab) : memory::desc();
        const auto weights = packed_weights(memory::desc({k, n}, memory::data_type::s8, memory::format_tag::ab));
        const auto pd = weights->prefer_packed(w_any, [&](const memory::desc &w) {
            return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, w, bias2, dst_md), attr, cpu_engine());
        });
        entry->primitive = dnnl::matmul(pd);
        entry->weights = pd.weights_desc();
        entry->dst = pd.dst_desc();
        entry->scratchpad = pd.scratchpad_desc();
        entry->packed = weights->get(entry->weights);
        entry->bias = bias2;
    } else {
        std::vector<int64_t> wdims(qweight_.sizes().begin(), qweight_.sizes().end());
        if (params_.groups > 1) {
            wdims[0] /= params_.groups;
            wdims.insert(wdims.begin(), params_.groups);
        }
        const memory::desc w_any = any_desc(wdims, memory::data_type::s8);
        const memory::desc dst_md = q8_desc(dst);
        std::vector<int64_t> dil;
        for (int64_t d : params_.dilation) dil.push_back(d - 1);  // oneDNN counts from 0
        // qweight_ is contiguous in its own dims; the grouped view splits the first of them.
        std::vector<int64_t> plain_strides(wdims.size());
        for (int64_t i = static_cast<int64_t>(wdims.size()) - 1, run = 1; i >= 0; --i) {
            plain_strides[i] = run;
            run *= wdims[i];
        }
        const auto weights = packed_weights(
            memory::desc(ops::to_dims(wdims), memory::data_type::s8, ops::to_dims(plain_strides)));
        const auto pd = weights->prefer_packed(w_any, [&](const memory::desc &w) {
            dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                                 dnnl::algorithm::convolution_direct, src_md, w, bias_md, dst_md,
                                                 ops::to_dims(params_.stride), ops::to_dims(dil),
                                                 ops::to_dims(params_.padding), ops::to_dims(params_.padding));
            return dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
        });
        entry->primitive = dnnl::convolution_forward(pd);
        entry->weights = pd.weights_desc();
        entry->dst = pd.dst_desc();
        entry->scratchpad = pd.scratchpad_desc();
        entry->packed = weights->get(entry->weights);
        entry->bias = bias_md;
    }
    entry->src = src_md;
    entry->zero_points = at::tensor({static_cast<int32_t>(params_.in_zero_point),
                                     static_cast<int32_t>(params_.out_zero_point)}, at::kInt);
    const auto zero_point = [&](int i) {
        return memory(memory::desc({1}, memory::data_type::s32, memory::format_tag::x), cpu_engine(),
                      entry->zero_points.data_ptr<int32_t>() + i);
    };
    auto &args = entry->constant_args;
    args.emplace(DNNL_ARG_WEIGHTS, entry->packed.memory);
    if (params_.in_zero_point != 0) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point(0));
    if (params_.out_zero_point != 0) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, zero_point(1));
    if (bias_.defined()) args.emplace(DNNL_ARG_BIAS, memory(entry->bias, cpu_engine(), bias_.data_ptr()));
    cache_->primitives.put(key, entry);
    return entry;
}

void Int8Context::execute_entry(const Entry &entry, const at::Tensor &src, const at::Tensor &dst) const {
    std::unordered_map<int, memory> args = entry.constant_args;
    args.emplace(DNNL_ARG_SRC, memory(entry.src, cpu_engine(), src.data_ptr()));
    args.emplace(DNNL_ARG_DST, memory(entry.dst, cpu_engine(), dst.data_ptr()));
    ops::execute(entry.primitive, entry.scratchpad, std::move(args));
}

const char *Int8Context::own_kernel() const { return stem_ ? "stem" : pointwise_ ? "pointwise" : ""; }

bool Int8Context::own_kernel_for(at::IntArrayRef input_sizes) const {
    if (!stem_ && !pointwise_) return false;
    if (own_always_) return true;
    const auto hit = cache_->own_choices.find(input_sizes.vec());
    return hit && *hit;
}

void Int8Context::run_own_kernel(const at::Tensor &src, const at::Tensor &dst, void *out_bytes) const {
    const auto *in = static_cast<const uint8_t *>(src.data_ptr());
    auto *out = static_cast<uint8_t *>(out_bytes);
    if (stem_) {
        stem::run(*stem_, in, src.size(0), src.size(2), src.size(3), out, dst.size(2), dst.size(3));
    } else {
        pointwise::run(*pointwise_, in, src.size(0), src.size(2), src.size(3), out);
    }
}

bool Int8Context::own_chosen(const at::Tensor &src, const at::Tensor &dst) const {
    if ((!stem_ && !pointwise_) || src.dim() != 4 || !src.is_contiguous(at::MemoryFormat::ChannelsLast) ||
        !dst.is_contiguous(at::MemoryFormat::ChannelsLast))
        return false;
    if (own_always_) return true;
    const ops::CacheKey key = src.sizes().vec();
    auto hit = cache_->own_choices.find(key);
    if (!hit) {
        // Timed into a scratch copy: a sum's summand in dst must survive for the real run.
        const auto entry = entry_for(src, dst);
        const at::Tensor scratch = at::empty({dst.numel()}, at::TensorOptions().dtype(at::kByte));
        std::memcpy(scratch.data_ptr(), dst.data_ptr(), dst.numel());
        constexpr int kRuns = 7;
        const bool faster = ops::own_kernels::time_both([&] { run_own_kernel(src, dst, scratch.data_ptr()); },
                                                        [&] { execute_entry(*entry, src, scratch); }, kRuns)
                                .own;
        hit = cache_->own_choices.put_if_absent(key, std::make_shared<const bool>(faster));
    }
    return *hit;
}

bool Int8Context::run_own(const at::Tensor &src, const at::Tensor &dst) const {
    if (!own_chosen(src, dst)) return false;
    run_own_kernel(src, dst, dst.data_ptr());
    return true;
}

at::Tensor Int8Context::run_max_pooled(const at::Tensor &input, const ops::PoolWindow &win, bool ceil_mode) const {
    if (!stem_ || input.dim() != 4 || !ops::own_kernels::available(false)) return {};
    const bool from_float = !input.is_quantized();
    const bool planes = from_float && input.is_contiguous() && !input.is_contiguous(at::MemoryFormat::ChannelsLast);
    if (from_float && (input.scalar_type() != at::kFloat ||
                       !(planes || input.is_contiguous(at::MemoryFormat::ChannelsLast))))
        return {};  // quantized first by the caller
    if (!from_float) check_input(input);
    const auto quantized = [&] {
        const Int8Params &p = params_;
        return from_float ? ipex::quant::quantize_per_tensor(input, p.in_scale, p.in_zero_point, p.in_dtype)
                          : channels_last_input(input);
    };
    const at::Tensor src = from_float ? at::Tensor() : quantized();
    const at::IntArrayRef sizes = input.sizes();  // channels-last or not: the logical sizes
    if (sizes[1] != weight_.size(1)) return {};    // the caller's error
    const std::vector<int64_t> conv = conv_output_sizes(sizes);
    if (conv.size() != 4 || conv[2] < 1 || conv[3] < 1 || input.numel() == 0) return {};
    std::vector<int64_t> pooled = conv;
    for (int i = 0; i < 2; ++i)
        pooled[2 + i] = ops::pooled_size(conv[2 + i], win.kernel[i], win.stride[i], win.padding[i], win.dilation[i],
                                         ceil_mode);
    if (pooled[2] < 1 || pooled[3] < 1) return {};
    // The choice is the convolution's alone (a new shape timed on the quantized input, into an
    // output of its own, made only then).
    bool own = own_always_;
    if (!own) {
        const auto decided = cache_->own_choices.find(sizes.vec());
        own = decided ? *decided
                      : own_chosen(src.defined() ? src : quantized(),
                                   empty_q8(conv, params_.out_dtype, params_.out_scale, params_.out_zero_point, true));
    }
    if (!own) return {};
    stem::Source from;
    if (from_float) {
        from.floats = input.data_ptr<float>();
        from.planes = planes;
        const bool s8 = params_.in_dtype == at::kQInt8;
        from.quantize = quantize_kernel::params_for(params_.in_scale, params_.in_zero_point + (s8 ? 128 : 0), false);
    } else {
        from.bytes = static_cast<const uint8_t *>(src.data_ptr());
    }
    at::Tensor out = empty_q8(pooled, params_.out_dtype, params_.out_scale, params_.out_zero_point, true);
    stem::run_max_pooled(*stem_, from, sizes[0], sizes[2], sizes[3], conv[2], conv[3], win, pooled[2], pooled[3],
                         static_cast<uint8_t *>(out.data_ptr()));
    return out;
}

at::Tensor Int8Context::channels_last_input(const at::Tensor &input) const {
    at::Tensor src = input;
    if (src.dim() >= 4 && !ops::is_channels_last(src))
        src = src.contiguous(src.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
    if (src.dim() == 3 && !ops::is_channels_last(src)) src = src.transpose(1, 2).contiguous().transpose(1, 2);
    return src;
}

at::Tensor Int8Context::run_into(const at::Tensor &input, const at::Tensor &out) const {
    check_input(input);
    IPEX_CHECK_INPUT(params_.kind != "linear" && !params_.sum && input.dim() == 4, "ipex int8 ", params_.kind,
                     ": run_into takes a 4-D input of a convolution without a sum");
    const at::Tensor src = channels_last_input(input);
    const std::vector<int64_t> dst_sizes = conv_output_sizes(src.sizes());
    IPEX_CHECK_INPUT((out.scalar_type() == at::kQUInt8 || out.scalar_type() == at::kQInt8) &&
                         out.sizes() == at::IntArrayRef(dst_sizes) && out.is_contiguous(at::MemoryFormat::ChannelsLast),
                     "ipex int8 ", params_.kind, ": run_into needs a channels-last quint8 or qint8 output of sizes ",
                     at::IntArrayRef(dst_sizes), ", got ", out.toString(), " ", out.sizes());
    at::Tensor keep = out;
    at::Tensor dst = at::from_blob_quantized_per_tensor_affine(
        keep.data_ptr(), keep.sizes(), keep.strides(), [keep](void *) {}, static_cast<float>(params_.out_scale),
        params_.out_zero_point, at::TensorOptions().dtype(params_.out_dtype));
    if (!run_own(src, dst)) execute_entry(*entry_for(src, dst), src, dst);
    return dst;
}

at::Tensor Int8Context::run_conv(const at::Tensor &input, const c10::optional<at::Tensor> &other) const {
    const at::Tensor src = channels_last_input(input);
    const std::vector<int64_t> dst_sizes = conv_output_sizes(src.sizes());
    at::Tensor dst;
    if (params_.sum && params_.sum_in_place && other && other->is_quantized() &&
        other->scalar_type() == params_.other_dtype && other->sizes() == at::IntArrayRef(dst_sizes) &&
        ops::is_channels_last(*other) && other->dim() >= 4 && !other->storage().is_alias_of(src.storage()) &&
        std::abs(other->q_scale() - params_.other_scale) <=
        1e-6 * params_.other_scale && other->q_zero_point() == params_.other_zero_point) {
        // The other operand's last use: the sum reads it where the result is written.
        at::Tensor keep = *other;
        dst = at::from_blob_quantized_per_tensor_affine(
            keep.data_ptr(), keep.sizes(), keep.strides(), [keep](void *) {}, static_cast<float>(params_.out_scale),
            params_.out_zero_point, at::TensorOptions().dtype(params_.out_dtype));
    } else {
        dst = empty_q8(dst_sizes, params_.out_dtype, params_.out_scale, params_.out_zero_point, true);
        if (params_.sum) copy_other(*this, other, dst);
    }
    if (run_own(src, dst)) return dst;
    auto entry = entry_for(src, dst);
    execute_entry(*entry, src, dst);
    return dst;
}

at::Tensor Int8Context::run_linear(const at::Tensor &input, const c10::optional<at::Tensor> &other) const {
    IPEX_CHECK_INPUT(input.dim() >= 1 && input.size(-1) == qweight_.size(0), "ipex int8 linear: input has ",
                input.size(-1), " features, expected ", qweight_.size(0));
    const at::Tensor src = input.reshape({-1, input.size(-1)}).contiguous();
    std::vector<int64_t> out_sizes(input.sizes().begin(), input.sizes().end());
    out_sizes.back() = qweight_.size(1);
    at::Tensor dst = empty_q8({src.size(0), qweight_.size(1)}, params_.out_dtype, params_.out_scale,
                              params_.out_zero_point, false);
    auto entry = entry_for(src, dst);
    if (params_.sum) copy_other(*this, other, dst);
    execute_entry(*entry, src, dst);
    return dst.reshape(out_sizes);
}

void Int8Context::check_input(const at::Tensor &input) const {
    q8_check(input, params_.in_dtype, "the input");
    IPEX_CHECK_INPUT(std::abs(input.q_scale() - params_.in_scale) <= 1e-6 * params_.in_scale &&
                    input.q_zero_point() == params_.in_zero_point,
                "ipex int8 ", params_.kind, ": input quantized with scale ", input.q_scale(), " zero point ",
                input.q_zero_point(), ", the op was prepacked for ", params_.in_scale, " / ", params_.in_zero_point);
}

at::Tensor Int8Context::run(const at::Tensor &input, const c10::optional<at::Tensor> &other) const {
    check_input(input);
    return params_.kind == "linear" ? run_linear(input, other) : run_conv(input, other);
}

std::string Int8Context::describe() const {
    std::ostringstream os;
    auto name = [](at::ScalarType t) { return t == at::kQInt8 ? "s8" : "u8"; };
    os << "int8 " << params_.kind << " " << weight_.sizes() << " " << name(params_.in_dtype) << "->"
       << name(params_.out_dtype) << (params_.relu ? " +relu" : "") << (params_.sum ? " +sum " : "")
       << (params_.sum ? name(params_.other_dtype) : "") << (params_.sum_relu ? " +relu" : "");
    return os.str();
}

Int8Context::State Int8Context::state() const {
    const Int8Params &p = params_;
    std::vector<int64_t> ints = {p.groups, p.in_zero_point, p.out_zero_point, p.relu, p.sum, p.other_zero_point,
                                 p.sum_relu, p.sum_in_place, static_cast<int64_t>(p.stride.size())};
    for (const auto *v : {&p.stride, &p.padding, &p.dilation}) ints.insert(ints.end(), v->begin(), v->end());
    c10::optional<at::Tensor> bias;
    if (bias_.defined()) {
        const at::Tensor s = at::tensor(weight_scales_, at::TensorOptions().dtype(at::kDouble)) *
                             int8_weight_scale_factor(p.in_dtype, p.kind, p.groups);
        bias = (bias_.to(at::kDouble) * s * p.in_scale).to(at::kFloat);
    }
    const std::vector<int64_t> dtypes = {static_cast<int64_t>(p.in_dtype), static_cast<int64_t>(p.out_dtype),
                                         static_cast<int64_t>(p.other_dtype)};
    return {kStateVersion, weight_, bias, weight_scales_, p.kind, ints, {p.in_scale, p.out_scale, p.other_scale},
            dtypes};
}

c10::intrusive_ptr<Int8Context> Int8Context::from_state(State state) {
    const int64_t version = std::get<0>(state);
    TORCH_CHECK(version == 1 || version == kStateVersion, "Int8Context: state version ", version,
                " is not supported (this build reads 1 and ", kStateVersion, ")");
    Int8Params p;
    p.kind = std::get<4>(state);
    const auto &ints = std::get<5>(state);
    const auto &doubles = std::get<6>(state);
    constexpr size_t kHeader = 9;
    TORCH_CHECK(ints.size() >= kHeader && doubles.size() == 3, "Int8Context: malformed state");
    p.groups = ints[0];
    p.in_zero_point = ints[1];
    p.out_zero_point = ints[2];
    p.relu = ints[3] != 0;
    p.sum = ints[4] != 0;
    p.other_zero_point = ints[5];
    p.sum_relu = ints[6] != 0;
    p.sum_in_place = ints[7] != 0;
    TORCH_CHECK(ints[8] >= 0 && ints[8] <= 3, "Int8Context: malformed state");
    const auto n = static_cast<size_t>(ints[8]);
    TORCH_CHECK(ints.size() == kHeader + 3 * n, "Int8Context: malformed state");
    p.stride.assign(ints.begin() + kHeader, ints.begin() + kHeader + n);
    p.padding.assign(ints.begin() + kHeader + n, ints.begin() + kHeader + 2 * n);
    p.dilation.assign(ints.begin() + kHeader + 2 * n, ints.end());
    p.in_scale = doubles[0];
    p.out_scale = doubles[1];
    p.other_scale = doubles[2];
    if (version >= 2) {  // version 1 models are all u8
        const auto &dtypes = std::get<7>(state);
        TORCH_CHECK(dtypes.size() == 3, "Int8Context: malformed state");
        at::ScalarType *fields[] = {&p.in_dtype, &p.out_dtype, &p.other_dtype};
        for (size_t i = 0; i < 3; ++i) {
            TORCH_CHECK(dtypes[i] == static_cast<int64_t>(at::kQUInt8) || dtypes[i] == static_cast<int64_t>(at::kQInt8),
                        "Int8Context: malformed state (activation dtype ", dtypes[i], ")");
            *fields[i] = static_cast<at::ScalarType>(dtypes[i]);
        }
    }
    return c10::make_intrusive<Int8Context>(std::get<1>(state), std::get<2>(state), std::get<3>(state), p);
}

}  // namespace ipex::quant
