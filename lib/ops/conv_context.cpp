#include "ops/conv_context.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <sstream>
#include <utility>

#include "core/sizes_text.h"
#include "ops/conv_own_plans.h"
#include "ops/own_kernels.h"
#include "ops/conv_deconv_gemm.h"
#include "ops/onednn_utils.h"
#include "ops/op_errors.h"

namespace ipex::ops {
namespace {

using dnnl::memory;

// Input size to prepack for when the caller gives no shape: batch 1 and this spatial extent.
constexpr int64_t kDefaultSpatial[] = {0, 128, 56, 16};

memory::format_tag channels_last_tag(int64_t rank) {
    switch (rank) {
        case 3: return memory::format_tag::nwc;
        case 4: return memory::format_tag::nhwc;
        case 5: return memory::format_tag::ndhwc;
        default: TORCH_CHECK(false, "ipex convolution: rank ", rank, " is not supported");
    }
}

// The dims of a PyTorch convolution weight in oneDNN's logical order: [G,] O/G, I/G, k... (G only
// when groups > 1).
std::vector<int64_t> onednn_weight_sizes(at::IntArrayRef weight, const ConvParams &p) {
    const int64_t g = p.groups;
    std::vector<int64_t> sizes;
    if (g > 1) sizes.push_back(g);
    if (p.transposed) {
        sizes.insert(sizes.end(), {weight[1], weight[0] / g});  // PyTorch: [I, O/G, k...]
    } else {
        sizes.insert(sizes.end(), {weight[0] / g, weight[1]});  // PyTorch: [O, I/G, k...]
    }
    sizes.insert(sizes.end(), weight.begin() + 2, weight.end());
    return sizes;
}

// The weight in oneDNN's logical order (onednn_weight_sizes), contiguous, in the compute dtype.
at::Tensor onednn_weight(const at::Tensor &weight, const ConvParams &p, at::ScalarType type) {
    at::Tensor w = weight.to(type).contiguous();
    const int64_t g = p.groups;
    std::vector<int64_t> kernel(w.sizes().begin() + 2, w.sizes().end());
    if (p.transposed) {
        // PyTorch: [I, O/G, k...] -> oneDNN: [G, O/G, I/G, k...]
        std::vector<int64_t> split{g, w.size(0) / g, w.size(1)};
        split.insert(split.end(), kernel.begin(), kernel.end());
        w = w.view(split).transpose(1, 2).contiguous();
    } else if (g > 1) {
        std::vector<int64_t> split{g, w.size(0) / g, w.size(1)};
        split.insert(split.end(), kernel.begin(), kernel.end());
        w = w.view(split);
    }
    if (g == 1 && w.dim() == weight.dim() + 1) w = w.squeeze(0);
    TORCH_INTERNAL_ASSERT(w.sizes() == at::IntArrayRef(onednn_weight_sizes(weight.sizes(), p)));
    return w.contiguous();
}

}  // namespace

at::ScalarType compute_scalar_type(const std::string &dtype) {
    if (dtype == "fp32" || dtype == "bf32") return at::kFloat;
    if (dtype == "bf16" || dtype == kBf32ToBf16) return at::kBFloat16;
    if (dtype == "fp16") return at::kHalf;
    TORCH_CHECK(false, "ipex ops: unknown compute dtype '", dtype, "' (fp32, bf32, ", kBf32ToBf16, ", bf16, fp16)");
}

ComputeTypes compute_types(const std::string &dtype) {
    const at::ScalarType io = compute_scalar_type(dtype);
    if (dtype != "bf32" && dtype != kBf32ToBf16) return {io, io, false};
    static const bool amx = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core_amx;
    if (amx) return ComputeTypes{at::kFloat, at::kFloat, true};
    return ComputeTypes{at::kBFloat16, dtype == "bf32" ? at::kFloat : at::kBFloat16, false};
}

namespace {

// Calls alternating per shape on its first call at run time.
constexpr int kRunTimeRuns = 3;

// Whether the own kernel runs input shape `key` of `ctx` (own_for): as the
// variable says, else the shape log's way while one is active (oneDNN's), else as recorded,
// else as timed on the shape's first call.
bool takes_own(const ConvolutionContext *ctx, own_kernels::Choice choice, const bool *recorded,
               TimedChoices &timed, const CacheKey &key, const std::function<void()> &own,
               const std::function<void()> &onednn, const std::function<void()> &before) {
    if (choice == own_kernels::Choice::own) return true;
    if (KernelShapeLog *log = KernelShapeLog::active()) {
        log->add(ctx, key);
        return false;
    }
    if (recorded) return *recorded;
    if (auto hit = timed.find(key)) return hit->own;
    auto chosen = std::make_shared<TimedChoice>();
    chosen->own = own_kernels::time_both(own, onednn, kRunTimeRuns, before).own;
    return timed.put_if_absent(key, chosen)->own;
}

}  // namespace

struct ConvolutionContext::Entry {
    dnnl::primitive primitive;
    memory::desc src, dst, scratchpad;
    WeightCache::Packed weight;
    at::Tensor bias_data;
    memory bias;
    // How many of the context's post-ops the primitive computes (all of them unless oneDNN
    // builds that list only with its reference kernel); execute_into runs the rest with aten.
    size_t fused = 0;
    std::string implementation;  // oneDNN's name for it ("jit_1x1:avx2")
    // A transposed convolution as GEMMs (conv_deconv_gemm.h): `primitive` is a matmul run once per
    // kernel-tap prefix, on the weights and into the output block at these element offsets.
    bool gemm = false;
    memory::desc gemm_weights;
    std::vector<int64_t> weight_offsets, dst_offsets;
};

ConvolutionContext::ConvolutionContext(at::Tensor weight, c10::optional<at::Tensor> bias,
                                       ConvParams params, std::string dtype, PostOps post_ops,
                                       bool sum_in_place, std::vector<int64_t> input_hint)
    : weight_(std::move(weight)), params_(std::move(params)), dtype_(std::move(dtype)),
      post_ops_(std::move(post_ops)), sum_in_place_(sum_in_place), input_hint_(std::move(input_hint)) {
    const ComputeTypes types = compute_types(dtype_);
    const size_t spatial = weight_.defined() ? static_cast<size_t>(std::max<int64_t>(weight_.dim() - 2, 0)) : 0;
    if (params_.output_padding.empty()) params_.output_padding.assign(spatial, 0);
    check_conv_params("ipex convolution", weight_, params_);
    const int64_t g = params_.groups;
    const int64_t out_channels = params_.transposed ? weight_.size(1) * g : weight_.size(0);
    check_bias("ipex convolution", bias, out_channels);
    if (bias && bias->defined()) {
        bias_ = bias->to(at::kFloat).contiguous();
        bias_bf16_ = bias_.to(at::kBFloat16);
    }
    validate(post_ops_);
    TORCH_CHECK(tensor_post_op(post_ops_) < 0 || post_ops_[tensor_post_op(post_ops_)].kind == "sum",
                "ipex convolution: the only tensor post-op of a convolution is sum");
    TORCH_CHECK(input_hint_.empty() || input_hint_.size() == spatial + 2,
                "ipex convolution: the input hint must have ", spatial + 2, " dims");
    if (deconv_as_gemm(params_, weight_.sizes()) && onednn_float(types.math)) {
        // The GEMM path reads its own copy; oneDNN's deconvolution weight only if a shape falls back.
        deconv_weight_ = deconv_gemm_weight(weight_, types.math);
        weights_ = std::make_shared<WeightCache>(
            onednn_weight_sizes(weight_.sizes(), params_),
            [weight = weight_, params = params_, math = types.math] { return onednn_weight(weight, params, math); });
    } else {
        weights_ = std::make_shared<WeightCache>(onednn_weight(weight_, params_, types.math));
    }
    primitives_ = std::make_shared<PrimitiveCache<Entry>>();
    trims_ = new_trim_cache(params_, weight_.sizes());

    std::vector<int64_t> hint = input_hint_;
    if (hint.empty()) {
        hint = {1, in_channels()};
        hint.resize(spatial + 2, kDefaultSpatial[spatial]);
    }
    bool hint_fits = true;
    for (int64_t s : output_sizes(hint)) hint_fits &= s > 0;
    plan_kernels();
    // A sum's dtype is known at run time only; prepack for the common case (compute dtype).
    const bool own_always = (depthwise_ && depthwise_->choice == own_kernels::Choice::own) ||
                            (pointwise_ && pointwise_->choice == own_kernels::Choice::own) ||
                            (grouped_ && grouped_->choice == own_kernels::Choice::own) ||
                            (winograd_ && winograd_->choice == own_kernels::Choice::own) ||
                            (stem_ && stem_->choice == own_kernels::Choice::own);
    if (hint_fits && !own_always)
        entry_for(hint, types.output, output_sizes(hint));
}

bool ConvolutionContext::own_for(const at::Tensor &src, const std::vector<int64_t> &dst_sizes) const {
    const OwnChoice *plan = depthwise_ ? static_cast<const OwnChoice *>(depthwise_.get())
                            : pointwise_ ? static_cast<const OwnChoice *>(pointwise_.get())
                            : grouped_   ? static_cast<const OwnChoice *>(grouped_.get())
                            : winograd_  ? static_cast<const OwnChoice *>(winograd_.get())
                            : stem_      ? static_cast<const OwnChoice *>(stem_.get())
                                         : static_cast<const OwnChoice *>(split_.get());
    if (!plan || ((depthwise_ || pointwise_ || grouped_ || winograd_ || stem_) && src.dim() != 4)) return false;
    if (winograd_ && !winograd_takes(src.sizes().vec())) return false;
    const CacheKey key = src.sizes().vec();
    const at::ScalarType type = compute_types(dtype_).output;
    // Timed calls write a new tensor each; with a sum it holds zeros for a summand (not whatever
    // bits the memory had, which could be subnormal or NaN and time otherwise).
    const bool sum = tensor_post_op(post_ops_) >= 0;
    const auto output = [&] {
        return sum ? zeros_channels_last(dst_sizes, type) : empty_channels_last(dst_sizes, type);
    };
    // A stem reading fp32 planes: oneDNN's side converts them as run() does, and each call
    // starts from empty caches, as a network's input does.
    const bool planes = stem_reads(src);
    const at::ScalarType math = compute_types(dtype_).math;
    own_kernels::CacheEvictor evict;  // its buffer made only if a timing runs
    return takes_own(
        this, plan->choice, recorded_for(key), *plan->timed, key, [&] { run_own(src, output()); },
        [&] { execute_into(planes ? to_channels_last(src, math) : src, output()); },
        planes ? std::function<void()>([&] { evict(); }) : std::function<void()>());
}

void ConvolutionContext::run_own(const at::Tensor &src, const at::Tensor &dst) const {
    if (stem_) return run_stem(src, dst);
    if (depthwise_) return run_depthwise(src, dst);
    if (pointwise_) return run_pointwise(src, dst);
    if (grouped_) return run_grouped(src, dst);
    if (winograd_) return run_winograd(src, dst);
    run_split(src, dst);
}

void ConvolutionContext::execute_into(const at::Tensor &src, const at::Tensor &dst) const {
    const auto entry = entry_for(src.sizes().vec(), dst.scalar_type(), dst.sizes().vec());
    if (entry->gemm) {
        // Every post-op is the matmul's (gemm_entry takes no other); a sum reads dst's summand.
        const size_t step = dst.element_size(), weight_step = deconv_weight_.element_size();
        for (size_t t = 0; t < entry->dst_offsets.size(); ++t) {
            std::unordered_map<int, memory> args{
                {DNNL_ARG_SRC, wrap(src, entry->src)},
                {DNNL_ARG_WEIGHTS, memory(entry->gemm_weights, cpu_engine(),
                                          static_cast<char *>(deconv_weight_.data_ptr()) +
                                              entry->weight_offsets[t] * weight_step)},
                {DNNL_ARG_DST, memory(entry->dst, cpu_engine(),
                                      static_cast<char *>(dst.data_ptr()) + entry->dst_offsets[t] * step)},
            };
            if (entry->bias_data.defined()) args.emplace(DNNL_ARG_BIAS, entry->bias);
            execute(entry->primitive, entry->scratchpad, std::move(args));
        }
        return;
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, wrap(src, entry->src)},
        {DNNL_ARG_WEIGHTS, entry->weight.memory},
        {DNNL_ARG_DST, wrap(dst, entry->dst)},
    };
    if (bias_.defined()) args.emplace(DNNL_ARG_BIAS, entry->bias);
    const int sum_at = tensor_post_op(post_ops_);
    size_t from = entry->fused;
    // A sum the primitive leaves out: dst holds the summand, which the convolution overwrites.
    const at::Tensor summand = sum_at >= 0 && from <= static_cast<size_t>(sum_at) ? dst.clone() : at::Tensor();
    execute(entry->primitive, entry->scratchpad, std::move(args));
    if (from == post_ops_.size()) return;
    at::Tensor y = dst;
    if (summand.defined()) {
        const PostOps before_sum(post_ops_.begin(), post_ops_.begin() + sum_at);
        y = at::add(apply_eltwise(y, before_sum, from), summand, post_ops_[sum_at].alpha);
        from = static_cast<size_t>(sum_at) + 1;
    }
    dst.copy_(apply_eltwise(y, post_ops_, from));
}

std::pair<std::string, size_t> ConvolutionContext::onednn_kernel(const std::vector<int64_t> &src_sizes,
                                                                 at::ScalarType dst_type) const {
    const auto entry = entry_for(src_sizes, dst_type, output_sizes(src_sizes));
    return {entry->implementation, entry->fused};
}

namespace {
std::atomic<KernelShapeLog *> active_shape_log{nullptr};
}  // namespace

KernelShapeLog::KernelShapeLog() {
    KernelShapeLog *none = nullptr;
    TORCH_CHECK(active_shape_log.compare_exchange_strong(none, this), "ipex convolution: a shape log is already active");
}

KernelShapeLog::~KernelShapeLog() { active_shape_log.store(nullptr); }

KernelShapeLog *KernelShapeLog::active() { return active_shape_log.load(std::memory_order_relaxed); }

void KernelShapeLog::add(const ConvolutionContext *ctx, const std::vector<int64_t> &shape) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &[seen, sizes] : shapes_)
        if (seen == ctx && sizes == shape) return;
    shapes_.emplace_back(ctx, shape);
}

std::vector<std::vector<int64_t>> KernelShapeLog::shapes_of(const ConvolutionContext *ctx) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::vector<int64_t>> found;
    for (const auto &[seen, sizes] : shapes_)
        if (seen == ctx) found.push_back(sizes);
    return found;
}

const bool *ConvolutionContext::recorded_for(const CacheKey &src_sizes) const {
    for (const auto &[sizes, own] : recorded_)
        if (sizes == src_sizes) return &own;
    return nullptr;
}

ConvolutionContext::KernelChoice ConvolutionContext::choose_kernel(const std::vector<int64_t> &input_sizes, int runs) {
    TORCH_CHECK(has_kernel_choice(), "ipex convolution: ", describe(), " has no own kernel to choose");
    TORCH_CHECK(input_sizes.size() == static_cast<size_t>(spatial_dims() + 2) && input_sizes[1] == in_channels(),
                "ipex convolution: cannot time ",
                describe(), " at input ", format_sizes(input_sizes));
    const std::vector<int64_t> dst_sizes = output_sizes(input_sizes);
    for (int64_t s : input_sizes) TORCH_CHECK(s > 0, "ipex convolution: cannot time at input ", format_sizes(input_sizes));
    for (int64_t s : dst_sizes) TORCH_CHECK(s > 0, "ipex convolution: input ", format_sizes(input_sizes), " is too small");
    if (winograd_ && !winograd_takes(input_sizes)) {  // oneDNN's direct kernel is the only one: nothing to time
        record_kernel(input_sizes, false);
        return {input_sizes, false, 0, 0};
    }
    // A stem is timed from fp32 planes, each call from empty caches (own_for).
    const at::ScalarType math = compute_types(dtype_).math;
    const at::Tensor input = at::randn(input_sizes);
    const at::Tensor src = stem_ ? input : to_channels_last(input, math);
    // Zeros: a summand when the post-ops have a sum (both kernels then read dst).
    const at::Tensor dst = zeros_channels_last(dst_sizes, compute_types(dtype_).output);
    own_kernels::CacheEvictor evict;
    const own_kernels::Timed timed = own_kernels::time_both(
        [&] { run_own(src, dst); }, [&] { execute_into(stem_ ? to_channels_last(src, math) : src, dst); }, runs,
        stem_ ? std::function<void()>([&] { evict(); }) : std::function<void()>());
    record_kernel(input_sizes, timed.own);
    return {input_sizes, timed.own, timed.own_seconds * 1e3, timed.onednn_seconds * 1e3};
}

void ConvolutionContext::record_kernel(const std::vector<int64_t> &input_sizes, bool own) {
    TORCH_CHECK(input_sizes.size() == static_cast<size_t>(spatial_dims() + 2),
                "ipex convolution: a kernel choice for input ", format_sizes(input_sizes), " of ", describe());
    for (auto &[sizes, recorded] : recorded_)
        if (sizes == input_sizes) {
            recorded = own;
            return;
        }
    recorded_.emplace_back(input_sizes, own);
}

c10::intrusive_ptr<ConvolutionContext> ConvolutionContext::changed_copy() const {
    auto copy = c10::make_intrusive<ConvolutionContext>(*this);
    copy->primitives_ = std::make_shared<PrimitiveCache<Entry>>();
    copy->trims_ = new_trim_cache(copy->params_, copy->weight_.sizes());
    copy->recorded_.clear();
    return copy;
}

std::vector<int64_t> ConvolutionContext::taken_output_sizes(at::IntArrayRef input) const {
    if (static_cast<int64_t>(input.size()) != spatial_dims() + 2 || input[1] != in_channels()) return {};
    std::vector<int64_t> out = output_sizes(input);
    for (int64_t s : out)
        if (s < 1) return {};
    return out;
}

std::vector<int64_t> ConvolutionContext::output_sizes(at::IntArrayRef input) const {
    const auto &p = params_;
    const int64_t g = p.groups;
    std::vector<int64_t> out{input[0], p.transposed ? weight_.size(1) * g : weight_.size(0)};
    for (int64_t d = 0; d < spatial_dims(); ++d) {
        const int64_t in = input[d + 2], k = weight_.size(d + 2);
        const int64_t extent = p.dilation[d] * (k - 1) + 1;
        if (p.transposed)
            out.push_back((in - 1) * p.stride[d] - 2 * p.padding[d] + extent + p.output_padding[d]);
        else
            out.push_back((in + 2 * p.padding[d] - extent) / p.stride[d] + 1);
    }
    return out;
}

std::shared_ptr<const ConvolutionContext::Entry> ConvolutionContext::entry_for(
    const std::vector<int64_t> &src_sizes, at::ScalarType dst_type, const std::vector<int64_t> &dst_sizes) const {
    CacheKey key(src_sizes);
    key.push_back(static_cast<int64_t>(dst_type));
    if (auto hit = primitives_->find(key)) return hit;
    if (deconv_weight_.defined()) {
        if (auto gemm = gemm_entry(src_sizes, dst_type)) {
            primitives_->put(key, gemm);
            return gemm;
        }
    }

    const int64_t rank = static_cast<int64_t>(src_sizes.size());
    const ComputeTypes types = compute_types(dtype_);
    const auto &p = params_;
    const memory::desc src_md(to_dims(src_sizes), to_dnnl(types.math), channels_last_tag(rank));
    const memory::desc dst_md(to_dims(dst_sizes), to_dnnl(dst_type), channels_last_tag(rank));
    const memory::desc weight_md(to_dims(weights_->sizes()), to_dnnl(types.math), memory::format_tag::any);
    // A bf16 output takes a bf16 bias, as aten's bf16 convolution does: the same rounding the
    // output gets anyway, and oneDNN's bf16 kernels run measurably faster with it.
    const at::Tensor bias_data = bias_type(dst_type) == at::kBFloat16 ? bias_bf16_ : bias_;
    const memory::desc bias_md = bias_.defined() ? memory::desc({bias_.size(0)}, to_dnnl(bias_data.scalar_type()),
                                                                memory::format_tag::x)
                                                 : memory::desc();
    memory::dims dilates, pad_r;
    for (int64_t d = 0; d < spatial_dims(); ++d) {
        dilates.push_back(p.dilation[d] - 1);
        pad_r.push_back(p.transposed ? p.padding[d] - p.output_padding[d] : p.padding[d]);
    }
    const memory::dims strides(p.stride.begin(), p.stride.end()), pad_l(p.padding.begin(), p.padding.end());

    // The attributes with the first `fused` post-ops.
    const auto attr_with = [&](size_t fused) {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        if (types.fpmath_bf16) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
        attr.set_post_ops(to_dnnl(PostOps(post_ops_.begin(), post_ops_.begin() + static_cast<long>(fused)), {}));
        return attr;
    };

    auto entry = std::make_shared<Entry>();
    const auto prop = dnnl::prop_kind::forward_inference;
    try {
        // The same steps for either primitive kind.
        const auto build = [&](auto primitive_tag, dnnl::algorithm algorithm) {
            using Primitive = decltype(primitive_tag);
            const auto make = [&](size_t fused) {
                const dnnl::primitive_attr attr = attr_with(fused);
                return weights_->prefer_packed(weight_md, [&](const memory::desc &weights) {
                    typename Primitive::desc desc(prop, algorithm, src_md, weights, bias_md, dst_md, strides,
                                                  dilates, pad_l, pad_r);
                    return typename Primitive::primitive_desc(desc, attr, cpu_engine());
                });
            };
            // oneDNN falls back to its reference kernel, about 100x slower, for post-op lists its
            // jit kernels do not take (2.6 on AVX2: relu, sum, relu after a 1x1 convolution):
            // then the longest leading part of the list that a jit kernel takes is fused, and
            // execute_into runs the rest.
            // A jit kernel that oneDNN then fails to create (2.6 with AVX512-BF16: a grouped
            // convolution with gelu_erf and a sum) counts as not taking the list either.
            // When every part is the reference kernel's, the whole list stays fused.
            const auto created = [&](const typename Primitive::primitive_desc &candidate) {
                try {
                    entry->primitive = Primitive(candidate);
                    return true;
                } catch (const dnnl::error &) {
                    return false;
                }
            };
            entry->fused = post_ops_.size();
            auto pd = make(entry->fused);
            bool made = !is_reference(pd) && created(pd);
            for (size_t fused = post_ops_.size(); !made && fused-- > 0;) {
                auto shorter = make(fused);
                if (is_reference(shorter) || !created(shorter)) continue;
                pd = shorter;
                entry->fused = fused;
                made = true;
            }
            if (!made) entry->primitive = Primitive(pd);
            entry->implementation = pd.impl_info_str();
            entry->weight = weights_->get(pd.weights_desc());
            entry->scratchpad = pd.scratchpad_desc();
        };
        if (p.transposed)
            build(dnnl::deconvolution_forward(), dnnl::algorithm::deconvolution_direct);
        else
            build(dnnl::convolution_forward(), dnnl::algorithm::convolution_direct);
    } catch (const dnnl::error &e) {
        TORCH_CHECK(false, "ipex convolution: oneDNN has no ", dtype_, " implementation of ", describe(),
                    " for input ", format_sizes(src_sizes), " on this CPU (", e.what(), ")");
    }
    entry->src = src_md;
    entry->dst = dst_md;
    entry->bias_data = bias_data;
    if (bias_.defined()) entry->bias = wrap(bias_data, bias_md);
    primitives_->put(key, entry);
    return entry;
}

std::shared_ptr<ConvolutionContext::Entry> ConvolutionContext::gemm_entry(const std::vector<int64_t> &src_sizes,
                                                                          at::ScalarType dst_type) const {
    const ComputeTypes types = compute_types(dtype_);
    const int64_t out_channels = weight_.size(1);
    const at::IntArrayRef kernel = weight_.sizes().slice(2);
    const at::ScalarType bias_dtype = bias_type(dst_type);
    const DeconvGemmShape shape = deconv_gemm_shape(src_sizes, kernel, out_channels, types.math, dst_type,
                                                    bias_.defined(), bias_dtype);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (types.fpmath_bf16) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
    attr.set_post_ops(to_dnnl(post_ops_, {}));
    auto entry = std::make_shared<Entry>();
    try {
        const dnnl::matmul::primitive_desc pd(
            dnnl::matmul::desc(shape.src, shape.weights, shape.bias, shape.dst), attr, cpu_engine());
        // oneDNN's reference loops (a post-op list or strides its kernels do not take) would be
        // slower than its deconvolution: that runs instead.
        if (is_reference(pd)) return nullptr;
        entry->primitive = dnnl::matmul(pd);
        entry->implementation = std::string("gemm deconvolution: ") + pd.impl_info_str();
        entry->scratchpad = pd.scratchpad_desc();
    } catch (const dnnl::error &) {
        return nullptr;
    }
    entry->gemm = true;
    entry->src = shape.src;
    entry->dst = shape.dst;
    entry->gemm_weights = shape.weights;
    entry->weight_offsets = shape.weight_offsets;
    entry->dst_offsets = shape.dst_offsets;
    entry->fused = post_ops_.size();
    if (bias_.defined()) {
        entry->bias_data = deconv_gemm_bias(bias_, kernel.back(), bias_dtype);
        entry->bias = wrap(entry->bias_data, shape.bias);
    }
    return entry;
}

at::Tensor ConvolutionContext::run(const at::Tensor &input, const c10::optional<at::Tensor> &other,
                                   bool may_write_other) const {
    const int64_t rank = spatial_dims() + 2;
    IPEX_CHECK_INPUT(input.is_floating_point(), "ipex convolution: expected a floating-point input, got ",
                input.scalar_type());
    const bool unbatched = input.dim() == rank - 1;
    const at::Tensor x = unbatched ? input.unsqueeze(0) : input;
    IPEX_CHECK_INPUT(x.dim() == rank, "ipex convolution: expected a ", rank - 1, "-D or ", rank,
                "-D input, got shape ", input.sizes());
    const std::vector<int64_t> dst_sizes = checked_output_sizes(x, input);
    if (const auto trimmed = trimmed_for(x.sizes())) return trimmed->run(input, other, may_write_other);

    const ComputeTypes types = compute_types(dtype_);
    // The network's fp32 planes, read as they are by the stem kernel, or converted for oneDNN
    // (the choice is the shape's either way: asked once).
    const bool planes = stem_reads(x);
    if (planes && own_for(x, dst_sizes)) {
        const at::Tensor y = empty_channels_last(dst_sizes, types.output);
        run_stem(x, y);
        return unbatched ? y.squeeze(0) : y;
    }
    const at::Tensor src = to_channels_last(x, types.math);
    const int sum_at = tensor_post_op(post_ops_);
    if (sum_at < 0 && !planes && own_for(src, dst_sizes)) {
        const at::Tensor y = empty_channels_last(dst_sizes, types.output);
        run_own(src, y);
        return unbatched ? y.squeeze(0) : y;
    }
    at::ScalarType dst_type = types.output;
    at::Tensor dst;
    if (sum_at >= 0) {
        TORCH_CHECK(other && other->defined(), "ipex convolution: the sum post-op needs a second tensor");
        at::Tensor o = unbatched && other->dim() == rank - 1 ? other->unsqueeze(0) : *other;
        IPEX_CHECK_INPUT(broadcastable(o.sizes(), dst_sizes), "ipex convolution: the added tensor of shape ",
                         o.sizes(), " does not broadcast with the output ", at::IntArrayRef(dst_sizes));
        if (o.dim() > 0) dst_type = at::promote_types(types.output, o.scalar_type());
        // oneDNN sums fp32/bf16 only, into an output of the conv's shape; aten does the rest.
        if (!onednn_float(o.scalar_type()) || !onednn_float(dst_type) || at::infer_size(o.sizes(), dst_sizes) != dst_sizes) {
            const at::Tensor y = run_unfused(x, o);
            return unbatched ? y.squeeze(0) : y;
        }
        if (sum_in_place_ && may_write_other && o.scalar_type() == dst_type && o.sizes() == at::IntArrayRef(dst_sizes) &&
            is_channels_last(o) && o.storage_offset() == 0 && o.storage().nbytes() == o.nbytes()) {
            dst = o;
        } else {
            dst = empty_channels_last(dst_sizes, dst_type);
            dst.copy_(o);
        }
    } else {
        dst = empty_channels_last(dst_sizes, types.output);
    }

    // A sum in the own kernel (the grouped one's AVX2 build plans it): dst holds the summand.
    if (sum_at >= 0 && dst.scalar_type() == types.output && own_for(src, dst_sizes))
        run_own(src, dst);
    else
        execute_into(src, dst);
    return unbatched ? dst.squeeze(0) : dst;
}

std::vector<int64_t> ConvolutionContext::checked_output_sizes(const at::Tensor &x, const at::Tensor &input) const {
    IPEX_CHECK_INPUT(x.size(1) == in_channels(), "ipex convolution: expected ", in_channels(),
                     " input channels, got shape ", input.sizes());
    std::vector<int64_t> dst_sizes = output_sizes(x.sizes());
    for (int64_t s : dst_sizes)
        IPEX_CHECK_INPUT(s > 0, "ipex convolution: input of shape ", input.sizes(), " is too small for ", describe());
    return dst_sizes;
}

void ConvolutionContext::run_into(const at::Tensor &input, const at::Tensor &out) const {
    TORCH_CHECK(tensor_post_op(post_ops_) < 0, "ipex convolution: ", describe(), " needs a second tensor");
    const int64_t rank = spatial_dims() + 2;
    IPEX_CHECK_INPUT(input.is_floating_point() && input.dim() == rank, "ipex convolution: expected a ", rank,
                     "-D floating-point input, got ", input.scalar_type(), " of shape ", input.sizes());
    const std::vector<int64_t> dst_sizes = checked_output_sizes(input, input);
    if (const auto trimmed = trimmed_for(input.sizes())) return trimmed->run_into(input, out);
    const ComputeTypes types = compute_types(dtype_);
    TORCH_CHECK(out.sizes() == at::IntArrayRef(dst_sizes) && out.scalar_type() == types.output &&
                    is_channels_last(out),
                "ipex convolution: cannot write ", describe(), "'s output ", at::IntArrayRef(dst_sizes), " into a ",
                out.scalar_type(), " tensor of shape ", out.sizes());
    const bool planes = stem_reads(input);  // as in run()
    if (planes && own_for(input, dst_sizes)) return run_stem(input, out);
    const at::Tensor src = to_channels_last(input, types.math);
    if (!planes && own_for(src, dst_sizes))
        run_own(src, out);
    else
        execute_into(src, out);
}

at::Tensor ConvolutionContext::run_unfused(const at::Tensor &x, const at::Tensor &other) const {
    const int sum_at = tensor_post_op(post_ops_);
    auto prefix = changed_copy();
    prefix->post_ops_.resize(sum_at);
    prefix->plan_kernels();
    const at::Tensor y = prefix->run(x, c10::nullopt);
    return apply_eltwise(at::add(y, other, post_ops_[sum_at].alpha), post_ops_, sum_at + 1);
}

c10::intrusive_ptr<ConvolutionContext> ConvolutionContext::with_dtype(const std::string &dtype) const {
    TORCH_CHECK(compute_types(dtype).math == compute_types(dtype_).math, "ipex convolution: ", dtype_,
                " and ", dtype, " differ in their math dtype");
    auto copy = changed_copy();
    copy->dtype_ = dtype;
    copy->plan_kernels();
    return copy;
}

c10::intrusive_ptr<ConvolutionContext> ConvolutionContext::with_post_ops(const PostOps &extra,
                                                                         bool sum_in_place) const {
    auto copy = changed_copy();
    copy->post_ops_.insert(copy->post_ops_.end(), extra.begin(), extra.end());
    validate(copy->post_ops_);
    TORCH_CHECK(tensor_post_op(copy->post_ops_) < 0 || copy->post_ops_[tensor_post_op(copy->post_ops_)].kind == "sum",
                "ipex convolution: the only tensor post-op of a convolution is sum");
    copy->sum_in_place_ = sum_in_place_ || sum_in_place;
    copy->plan_kernels();
    return copy;
}

ConvolutionContext::State ConvolutionContext::state() const {
    std::vector<at::Tensor> bias;
    if (bias_.defined()) bias.push_back(bias_);
    std::vector<std::vector<int64_t>> recorded;
    for (const auto &[sizes, own] : recorded_) {
        recorded.push_back({own ? 1 : 0});
        recorded.back().insert(recorded.back().end(), sizes.begin(), sizes.end());
    }
    return State{kStateVersion, weight_, bias, params_.stride, params_.padding, params_.dilation,
                 params_.output_padding, params_.groups, params_.transposed, dtype_, kinds_of(post_ops_),
                 params_of(post_ops_), sum_in_place_, input_hint_, std::move(recorded)};
}

c10::intrusive_ptr<ConvolutionContext> ConvolutionContext::from_state(State s) {
    TORCH_CHECK(std::get<0>(s) == kStateVersion, "ipex convolution: saved context version ", std::get<0>(s),
                " is not supported (expected ", kStateVersion, ")");
    const auto &bias = std::get<2>(s);
    TORCH_CHECK(bias.size() <= 1, "ipex convolution: a saved context has ", bias.size(), " bias tensors");
    ConvParams p{std::get<3>(s), std::get<4>(s), std::get<5>(s), std::get<6>(s), std::get<7>(s), std::get<8>(s)};
    auto ctx = c10::make_intrusive<ConvolutionContext>(
        std::get<1>(s), bias.empty() ? c10::nullopt : c10::optional<at::Tensor>(bias[0]), std::move(p),
        std::get<9>(s), from_pickled(std::get<10>(s), std::get<11>(s)), std::get<12>(s), std::get<13>(s));
    for (const auto &choice : std::get<14>(s)) {
        TORCH_CHECK(choice.size() == static_cast<size_t>(ctx->spatial_dims() + 3) && (choice[0] == 0 || choice[0] == 1),
                    "ipex convolution: a saved kernel choice [", format_sizes(choice, ", "), "] is not [0 or 1, ",
                    ctx->spatial_dims() + 2, " input sizes]");
        const std::vector<int64_t> sizes(choice.begin() + 1, choice.end());
        for (int64_t size : sizes)
            TORCH_CHECK(size > 0, "ipex convolution: a saved kernel choice has input sizes [", format_sizes(sizes, ", "), "]");
        ctx->record_kernel(sizes, choice[0] == 1);
    }
    return ctx;
}

namespace {

// The items of a pickled tuple as the typed tuple (c10::Error where an item has another type).
template <class Tuple, size_t... I>
Tuple typed_tuple(const std::vector<c10::IValue> &items, std::index_sequence<I...>) {
    return Tuple{items[I].to<std::tuple_element_t<I, Tuple>>()...};
}

}  // namespace

c10::intrusive_ptr<ConvolutionContext> ConvolutionContext::from_saved(const c10::IValue &state) {
    TORCH_CHECK(state.isTuple() && !state.toTupleRef().elements().empty() &&
                    state.toTupleRef().elements()[0].isInt(),
                "ipex convolution: a saved context is not a tuple starting with its version");
    const auto &items = state.toTupleRef().elements();
    const int64_t version = items[0].toInt();
    const size_t expected = version == 1 ? std::tuple_size<StateV1>::value : std::tuple_size<State>::value;
    TORCH_CHECK(version == 1 || version == kStateVersion, "ipex convolution: saved context version ", version,
                " is not supported (expected 1 or ", kStateVersion, ")");
    TORCH_CHECK(items.size() == expected, "ipex convolution: a saved context of version ", version, " has ",
                items.size(), " items, expected ", expected);
    const std::vector<c10::IValue> values = items.vec();
    if (version == kStateVersion)
        return from_state(typed_tuple<State>(values, std::make_index_sequence<std::tuple_size<State>::value>()));
    StateV1 v1 = typed_tuple<StateV1>(values, std::make_index_sequence<std::tuple_size<StateV1>::value>());
    std::get<0>(v1) = kStateVersion;
    return from_state(std::tuple_cat(std::move(v1), std::make_tuple(std::vector<std::vector<int64_t>>{})));
}

std::string ConvolutionContext::describe() const {
    std::ostringstream out;
    const int64_t g = params_.groups;
    const int64_t in = params_.transposed ? weight_.size(0) : weight_.size(1) * g;
    const int64_t outc = params_.transposed ? weight_.size(1) * g : weight_.size(0);
    out << (params_.transposed ? "conv_transpose" : "conv") << spatial_dims() << "d " << in << "->" << outc
        << " k" << format_sizes(weight_.sizes().slice(2)) << " s" << format_sizes(params_.stride) << " p"
        << format_sizes(params_.padding) << " d" << format_sizes(params_.dilation) << " g" << g << " " << dtype_;
    if (!post_ops_.empty()) out << " +" << ops::describe(post_ops_);
    return out.str();
}

}  // namespace ipex::ops
