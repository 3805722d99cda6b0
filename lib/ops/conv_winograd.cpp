// oneDNN's Winograd convolution as a ConvolutionContext's own-kernel choice (conv_own_plans.h):
// which convolutions may take it, its primitives per input shape and the call that runs it
// between the channels-last activations and the blocked layout the kernel takes.
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "ops/conv_own_plans.h"
#include "ops/onednn_utils.h"

namespace ipex::ops {
namespace {

using dnnl::memory;

// Where oneDNN 2.6 has Winograd kernels: fp32 on AVX-512 (none for bf16, none on AVX2), unless
// IPEX_CONV_WINOGRAD=0 (every convolution direct: the bits of oneDNN's direct kernels).
bool winograd_available(bool bf16) {
    static const bool avx512 = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
    const char *setting = std::getenv(kWinogradVariable);
    TORCH_CHECK(!setting || std::string(setting) == "0" || std::string(setting) == "1", kWinogradVariable,
                " must be 0 or 1, got '", setting, "'");
    return !bf16 && avx512 && !(setting && std::string(setting) == "0");
}

// The post-ops oneDNN's Winograd kernels take: relu (slope 0), a sum, a relu after it.
bool winograd_post_ops(const PostOps &ops) {
    for (const PostOp &op : ops)
        if (!(op.kind == "relu" && op.alpha == 0) && op.kind != "sum") return false;
    return true;
}

}  // namespace

struct ConvolutionContext::Winograd::Shape {
    bool made = false;  // oneDNN has a Winograd kernel for this shape and these post-ops
    dnnl::primitive conv, src_in, dst_in, dst_out;  // src_in / dst_in: channels-last to blocked
    memory::desc src_blocked, dst_blocked, src_last, dst_last, scratchpad;
    WeightCache::Packed weight;
    memory bias;
};

void ConvolutionContext::plan_winograd() {
    winograd_.reset();
    const auto &p = params_;
    const bool dense_3x3 = !p.transposed && spatial_dims() == 2 && p.groups == 1 && weight_.size(2) == 3 &&
                           weight_.size(3) == 3 && p.stride[0] == 1 && p.stride[1] == 1 && p.dilation[0] == 1 &&
                           p.dilation[1] == 1;
    if (!dense_3x3 || depthwise_ || pointwise_ || grouped_ || !winograd_post_ops(post_ops_)) return;
    const auto choice = own_choice(compute_types(dtype_), winograd_available);
    if (!choice) return;
    auto plan = std::make_shared<Winograd>();
    plan->choice = *choice;
    plan->weights = std::make_shared<WeightCache>(weights_->plain());
    winograd_ = plan;
}

bool ConvolutionContext::winograd_takes(const std::vector<int64_t> &src_sizes) const {
    if (!winograd_ || src_sizes.size() != 4) return false;
    if (const auto hit = winograd_->shapes->find(src_sizes)) return hit->made;
    auto shape = std::make_shared<Winograd::Shape>();
    const std::vector<int64_t> dst_sizes = output_sizes(src_sizes);
    const auto &p = params_;
    const memory::dims src_dims = to_dims(src_sizes), dst_dims = to_dims(dst_sizes);
    shape->src_last = memory::desc(src_dims, memory::data_type::f32, memory::format_tag::nhwc);
    shape->dst_last = memory::desc(dst_dims, memory::data_type::f32, memory::format_tag::nhwc);
    shape->src_blocked = memory::desc(src_dims, memory::data_type::f32, memory::format_tag::nChw16c);
    shape->dst_blocked = memory::desc(dst_dims, memory::data_type::f32, memory::format_tag::nChw16c);
    const memory::desc weight_md(to_dims(weight_.sizes()), memory::data_type::f32, memory::format_tag::any);
    const memory::desc bias_md =
        bias_.defined() ? memory::desc({bias_.size(0)}, memory::data_type::f32, memory::format_tag::x) : memory::desc();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_post_ops(to_dnnl(post_ops_, {}));
    try {
        const dnnl::convolution_forward::desc desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, shape->src_blocked, weight_md,
            bias_md, shape->dst_blocked, {1, 1}, {0, 0}, {p.padding[0], p.padding[1]}, {p.padding[0], p.padding[1]});
        const dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
        const auto &weights = *winograd_->weights;
        if (!is_reference(pd) &&
            (weights.holds(pd.weights_desc()) || weights.layouts() < Winograd::kMaxLayouts)) {
            shape->conv = dnnl::convolution_forward(pd);
            shape->scratchpad = pd.scratchpad_desc();
            shape->weight = winograd_->weights->get(pd.weights_desc());
            const auto reorder = [](const memory::desc &from, const memory::desc &to) {
                return dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
            };
            shape->src_in = reorder(shape->src_last, shape->src_blocked);
            shape->dst_in = reorder(shape->dst_last, shape->dst_blocked);
            shape->dst_out = reorder(shape->dst_blocked, shape->dst_last);
            if (bias_.defined()) shape->bias = wrap(bias_, bias_md);
            shape->made = true;
        }
    } catch (const dnnl::error &) {
        shape->made = false;  // no Winograd kernel for this shape or post-op list: the direct one runs
    }
    return winograd_->shapes->put_if_absent(src_sizes, shape)->made;
}

size_t ConvolutionContext::winograd_layouts() const { return winograd_ ? winograd_->weights->layouts() : 0; }

void ConvolutionContext::run_winograd(const at::Tensor &src, const at::Tensor &dst) const {
    // own_for made the shape's entry just before (made again if the cache has dropped it since).
    const std::vector<int64_t> sizes = src.sizes().vec();
    auto shape = winograd_->shapes->find(sizes);
    if (!shape && winograd_takes(sizes)) shape = winograd_->shapes->find(sizes);
    TORCH_CHECK(shape && shape->made, "ipex convolution: no Winograd kernel for ", describe(), " at input ",
                src.sizes());
    const auto blocked = [](const memory::desc &desc) {
        const at::Tensor bytes = at::empty({static_cast<int64_t>(desc.get_size())}, at::kByte);
        return std::make_pair(bytes, memory(desc, cpu_engine(), bytes.data_ptr()));
    };
    const auto [src_bytes, src_mem] = blocked(shape->src_blocked);
    const auto [dst_bytes, dst_mem] = blocked(shape->dst_blocked);
    execute(shape->src_in, {}, {{DNNL_ARG_FROM, wrap(src, shape->src_last)}, {DNNL_ARG_TO, src_mem}});
    if (tensor_post_op(post_ops_) >= 0)  // dst holds the summand
        execute(shape->dst_in, {}, {{DNNL_ARG_FROM, wrap(dst, shape->dst_last)}, {DNNL_ARG_TO, dst_mem}});
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, shape->weight.memory}, {DNNL_ARG_DST, dst_mem}};
    if (bias_.defined()) args.emplace(DNNL_ARG_BIAS, shape->bias);
    execute(shape->conv, shape->scratchpad, std::move(args));
    execute(shape->dst_out, {}, {{DNNL_ARG_FROM, dst_mem}, {DNNL_ARG_TO, wrap(dst, shape->dst_last)}});
}

}  // namespace ipex::ops
