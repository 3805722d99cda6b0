#include "ops/linear_context.h"

#include "ops/state_checks.h"

#include <sstream>

#include "ops/conv_context.h"
#include "ops/onednn_utils.h"
#include "ops/op_errors.h"

namespace ipex::ops {

using dnnl::memory;

namespace {

// The gemm-based matmul (oneDNN 2.6 on AVX2; elsewhere the shapes its brgemm does not take)
// asks `any` for the plain [in, out] weight. Its sgemm packs that weight walking down the
// columns; with `out` a multiple of 128 fp32 (512 B: 512, 768, 1024, 3072, 4096) the rows fall
// into the same cache sets and the linear runs at about 30% of the FMA peak (150x12544x1024:
// 64 GFLOP/s on a 217 GFLOP/s AVX2 host, 1 or 2 threads alike), 85-90% with the rows padded
// to an odd number of cache lines (bench/linear_shapes; bench/RESULTS.md, "Detection"). The
// padded layout (one line more per row at most) is taken when the same implementation builds
// with it; `chosen` otherwise.
template <class Make>
auto with_padded_rows(dnnl::matmul::primitive_desc chosen, Make make) -> dnnl::matmul::primitive_desc {
    const std::string impl = chosen.impl_info_str();
    if (impl.rfind("gemm", 0) != 0) return chosen;
    const memory::desc padded = odd_line_rows(chosen.weights_desc());
    if (padded == memory::desc()) return chosen;
    try {
        auto pd = make(padded);
        if (impl == pd.impl_info_str()) return pd;
    } catch (const dnnl::error &) {
        // no implementation takes the padded rows: the plain ones it is
    }
    return chosen;
}

// Whether oneDNN builds a bf16 matmul other than its reference code on this CPU (AVX-512 and up).
bool onednn_bf16_matmul() {
    static const bool available = [] {
        try {
            const memory::desc a({4, 8}, memory::data_type::bf16, memory::format_tag::ab);
            const memory::desc b({8, 8}, memory::data_type::bf16, memory::format_tag::any);
            const memory::desc c({4, 8}, memory::data_type::bf16, memory::format_tag::ab);
            const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), cpu_engine());
            return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
        } catch (const dnnl::error &) {
            return false;
        }
    }();
    return available;
}

}  // namespace

struct LinearContext::Entry {
    dnnl::primitive primitive;
    memory::desc src, dst, other, scratchpad;
    WeightCache::Packed weight;
    memory bias;
};

LinearContext::LinearContext(at::Tensor weight, c10::optional<at::Tensor> bias, std::string dtype,
                             PostOps post_ops, int64_t rows_hint, bool weight_in_place)
    : weight_(std::move(weight)), dtype_(std::move(dtype)), post_ops_(std::move(post_ops)),
      rows_hint_(rows_hint) {
    const ComputeTypes types = compute_types(dtype_);
    widened_ = types.math == at::kBFloat16 && !onednn_bf16_matmul();
    math_ = widened_ ? at::kFloat : types.math;
    check_linear_weight("ipex linear", weight_);
    TORCH_CHECK(rows_hint_ >= 0, "ipex linear: the rows hint must be >= 0");
    check_bias("ipex linear", bias, weight_.size(0), "output features");
    if (bias && bias->defined()) bias_ = bias->to(at::kFloat).contiguous();
    validate(post_ops_);
    TORCH_CHECK(tensor_post_op(post_ops_) < 0 || post_ops_[tensor_post_op(post_ops_)].kind != "sum",
                "ipex linear: use the add post-op rather than sum");
    // The matmul reads the weight as [in, out]: the plain [out, in] tensor, transposed.
    // Widened: the bf16 values, held in fp32.
    const at::Tensor plain =
        (widened_ ? weight_.to(at::kBFloat16).to(at::kFloat) : weight_.to(types.math)).contiguous();
    weights_ = std::make_shared<WeightCache>(
        plain, memory::desc({in_features(), out_features()}, to_dnnl(math_), memory::dims{1, in_features()}));
    if (weight_in_place) {
        // The converted tensor is the one copy: a weight given in another dtype or layout is
        // not also kept as given.
        weight_ = plain;
        weights_->adopt_plain();
    }
    reset_caches();
    if (tensor_post_op(post_ops_) < 0) {
        const at::ScalarType dst = widened_ ? at::kFloat : types.output;
        entry_for(rows_hint_ > 0 ? rows_hint_ : kDefaultRows, dst, "", dst);
    }
}

std::shared_ptr<const LinearContext::Entry> LinearContext::entry_for(int64_t rows, at::ScalarType dst_type,
                                                                     const std::string &other_kind,
                                                                     at::ScalarType other_type) const {
    const CacheKey key{rows, static_cast<int64_t>(dst_type),
                       other_kind.empty() ? 0 : (other_kind == "row" ? 1 : 2),
                       other_kind.empty() ? -1 : static_cast<int64_t>(other_type)};
    if (auto hit = primitives_->find(key)) return hit;

    const ComputeTypes types = compute_types(dtype_);
    const int64_t n = out_features(), k = in_features();
    const memory::desc src_md({rows, k}, to_dnnl(math_), memory::format_tag::ab);
    const memory::desc dst_md({rows, n}, to_dnnl(dst_type), memory::format_tag::ab);
    const memory::desc weight_md({k, n}, to_dnnl(math_), memory::format_tag::any);
    const memory::desc bias_md =
        bias_.defined() ? memory::desc({1, n}, memory::data_type::f32, memory::format_tag::ab) : memory::desc();
    memory::desc other_md;
    if (other_kind == "row") other_md = memory::desc({1, n}, to_dnnl(other_type), memory::format_tag::ab);
    if (other_kind == "full") other_md = memory::desc({rows, n}, to_dnnl(other_type), memory::format_tag::ab);

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (types.fpmath_bf16) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
    attr.set_post_ops(to_dnnl(post_ops_, other_md));

    auto entry = std::make_shared<Entry>();
    try {
        // A matmul rather than an inner product: oneDNN 2.6's brgemm inner product loses up to
        // a third of its speed at some row counts (197, 394, ...), its matmul does not.
        const auto make = [&](const memory::desc &weights) {
            return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, weights, bias_md, dst_md), attr,
                                                cpu_engine());
        };
        const auto pd = weights_->prefer_packed(weight_md, [&](const memory::desc &weights) {
            auto chosen = make(weights);
            return weights == weight_md ? with_padded_rows(chosen, make) : chosen;
        });
        entry->primitive = dnnl::matmul(pd);
        entry->weight = weights_->get(pd.weights_desc());
        entry->scratchpad = pd.scratchpad_desc();
    } catch (const dnnl::error &e) {
        TORCH_CHECK(false, "ipex linear: oneDNN has no ", dtype_, " implementation of ", describe(), " for ", rows,
                    " rows on this CPU (", e.what(), ")");
    }
    entry->src = src_md;
    entry->dst = dst_md;
    entry->other = other_md;
    if (bias_.defined()) entry->bias = wrap(bias_, bias_md);
    primitives_->put(key, entry);
    return entry;
}

at::Tensor LinearContext::run(const at::Tensor &input, const c10::optional<at::Tensor> &other) const {
    IPEX_CHECK_INPUT(input.is_floating_point(), "ipex linear: expected a floating-point input, got ",
                input.scalar_type());
    IPEX_CHECK_INPUT(input.dim() >= 1 && input.size(-1) == in_features(), "ipex linear: expected an input with ",
                in_features(), " features in the last dim, got shape ", input.sizes());
    const ComputeTypes types = compute_types(dtype_);
    const int64_t n = out_features(), k = in_features();
    const int64_t rows = input.numel() / k;
    std::vector<int64_t> dst_sizes = input.sizes().vec();
    dst_sizes.back() = n;
    at::Tensor dst;
    if (rows == 0) return at::empty(dst_sizes, input.options().dtype(types.output));

    at::ScalarType dst_type = types.output;
    std::string other_kind;
    at::Tensor src1;
    if (tensor_post_op(post_ops_) >= 0) {
        TORCH_CHECK(other && other->defined(), "ipex linear: the ", post_ops_[tensor_post_op(post_ops_)].kind,
                    " post-op needs a second tensor");
        const at::Tensor &o = *other;
        IPEX_CHECK_INPUT(broadcastable(o.sizes(), dst_sizes), "ipex linear: the ",
                         post_ops_[tensor_post_op(post_ops_)].kind, " operand of shape ", o.sizes(),
                         " does not broadcast with the output ", at::IntArrayRef(dst_sizes));
        if (o.dim() > 0) dst_type = at::promote_types(types.output, o.scalar_type());
        // oneDNN combines fp32/bf16 only, into an output of the linear's shape; aten does the rest.
        if (!onednn_float(o.scalar_type()) || !onednn_float(dst_type) || at::infer_size(o.sizes(), dst_sizes) != dst_sizes)
            return run_unfused(input, o);
        if (o.numel() == n && o.dim() >= 1 && o.size(-1) == n) {
            other_kind = "row";
            src1 = o.contiguous().view({1, n});
            if (widened_) src1 = src1.to(at::kFloat);
        } else {
            other_kind = "full";
        }
    }
    // Widened: the matmul writes fp32 (a second operand widened too), rounded to dst_type after.
    const at::ScalarType primitive_dst = widened_ ? at::kFloat : dst_type;
    // A row count past the exact ones runs on its bucket's primitive: the operands with rows
    // are padded with zero rows, the output is the leading rows of the bucket's.
    const int64_t build_rows = buckets_->rows_to_build(rows);
    // `t` (broadcast to the leading dims and `cols`) as dense [build_rows, cols] in `type`, in
    // one copy at most.
    const auto rows_of = [&](const at::Tensor &t, at::ScalarType type, int64_t cols) {
        std::vector<int64_t> sizes = dst_sizes;
        sizes.back() = cols;
        if (build_rows == rows) return t.to(type).expand(sizes).contiguous().view({rows, cols});
        at::Tensor padded = at::empty({build_rows, cols}, t.options().dtype(type));
        padded.narrow(0, 0, rows).view(sizes).copy_(t.expand(sizes));
        padded.narrow(0, rows, build_rows - rows).zero_();
        return padded;
    };
    // Widened: the input rounded to bf16 as a bf16 kernel reads it, then held in fp32 (exact).
    const at::Tensor src_rows = rows_of(widened_ ? input.to(at::kBFloat16) : input, math_, k);
    if (other_kind == "full") src1 = rows_of(*other, widened_ ? at::kFloat : other->scalar_type(), n);
    dst = at::empty({build_rows, n}, input.options().dtype(primitive_dst));
    const auto entry =
        entry_for(build_rows, primitive_dst, other_kind, src1.defined() ? src1.scalar_type() : primitive_dst);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, wrap(src_rows, entry->src)},
        {DNNL_ARG_WEIGHTS, entry->weight.memory},
        {DNNL_ARG_DST, wrap(dst, entry->dst)},
    };
    if (bias_.defined()) args.emplace(DNNL_ARG_BIAS, entry->bias);
    if (src1.defined())
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(tensor_post_op(post_ops_)) | DNNL_ARG_SRC_1,
                     wrap(src1, entry->other));
    execute(entry->primitive, entry->scratchpad, std::move(args));
    const at::Tensor out = build_rows != rows ? dst.narrow(0, 0, rows).view(dst_sizes) : dst.view(dst_sizes);
    return widened_ ? out.to(dst_type) : out;
}

void LinearContext::reset_caches() {
    primitives_ = std::make_shared<PrimitiveCache<Entry, kMaxPrimitives>>();
    buckets_ = std::make_shared<RowBuckets>();
    unfused_ = std::make_shared<Unfused>();
}

at::Tensor LinearContext::run_unfused(const at::Tensor &input, const at::Tensor &other) const {
    const int at_op = tensor_post_op(post_ops_);
    c10::intrusive_ptr<LinearContext> prefix;
    {
        std::lock_guard<std::mutex> lock(unfused_->mutex);
        if (!unfused_->prefix) {
            auto made = c10::make_intrusive<LinearContext>(*this);
            made->post_ops_.resize(at_op);
            made->reset_caches();
            unfused_->prefix = made;
        }
        prefix = unfused_->prefix;
    }
    const at::Tensor y = prefix->run(input, c10::nullopt);
    const at::Tensor combined = post_ops_[at_op].kind == "mul" ? at::mul(y, other) : at::add(y, other);
    return apply_eltwise(combined, post_ops_, at_op + 1);
}

c10::intrusive_ptr<LinearContext> LinearContext::with_dtype(const std::string &dtype) const {
    TORCH_CHECK(compute_types(dtype).math == compute_types(dtype_).math, "ipex linear: ", dtype_, " and ", dtype,
                " differ in their math dtype");
    auto copy = c10::make_intrusive<LinearContext>(*this);
    copy->dtype_ = dtype;
    copy->reset_caches();
    return copy;
}

c10::intrusive_ptr<LinearContext> LinearContext::with_post_ops(const PostOps &extra) const {
    auto copy = c10::make_intrusive<LinearContext>(*this);
    copy->post_ops_.insert(copy->post_ops_.end(), extra.begin(), extra.end());
    validate(copy->post_ops_);
    TORCH_CHECK(tensor_post_op(copy->post_ops_) < 0 || copy->post_ops_[tensor_post_op(copy->post_ops_)].kind != "sum",
                "ipex linear: use the add post-op rather than sum");
    copy->reset_caches();
    return copy;
}

LinearContext::State LinearContext::state() const {
    std::vector<at::Tensor> bias;
    if (bias_.defined()) bias.push_back(bias_);
    return State{kStateVersion, weight_, bias, dtype_, kinds_of(post_ops_), params_of(post_ops_), rows_hint_};
}

c10::intrusive_ptr<LinearContext> LinearContext::from_state(State s) {
    TORCH_CHECK(std::get<0>(s) == kStateVersion, "ipex linear: saved context version ", std::get<0>(s),
                " is not supported (expected ", kStateVersion, ")");
    const auto &bias = std::get<2>(s);
    TORCH_CHECK(bias.size() <= 1, "ipex linear: a saved context has ", bias.size(), " bias tensors");
    return c10::make_intrusive<LinearContext>(std::get<1>(s),
                                              bias.empty() ? c10::nullopt : c10::optional<at::Tensor>(bias[0]),
                                              std::get<3>(s), from_pickled(std::get<4>(s), std::get<5>(s)),
                                              std::get<6>(s));
}

std::string LinearContext::describe() const {
    std::ostringstream out;
    out << "linear " << in_features() << "->" << out_features() << (bias_.defined() ? "" : " nobias") << " "
        << dtype_;
    if (!post_ops_.empty()) out << " +" << ops::describe(post_ops_);
    return out.str();
}

}  // namespace ipex::ops
