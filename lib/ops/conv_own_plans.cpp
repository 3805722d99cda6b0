// The own-kernel plans of ConvolutionContext (conv_own_plans.h): which convolutions each own
// kernel computes, its weights packed as the kernel takes them, and the calls that run it.
#include <cstdlib>
#include <optional>

#include "ops/conv_own_plans.h"
#include "ops/onednn_utils.h"

namespace ipex::ops {
namespace {

// Input channels up to which a 1x1 convolution may run the own pointwise kernel (its packed
// weight is a second copy beside oneDNN's).
constexpr int64_t kPointwiseMaxChannels = 4096;

// The own kernel's form of a post-op it computes (false for another).
bool to_eltwise(const PostOp &op, own_kernels::Eltwise *e) {
    if (!own_kernels::to_act(op.kind, &e->act)) return false;
    e->alpha = static_cast<float>(op.alpha);
    e->beta = static_cast<float>(op.beta);
    return true;
}

// ops[start..] appended to the post-ops of `problem`: false when one is not the own kernels'.
bool add_post_ops(const PostOps &ops, size_t start, own_kernels::Problem *problem) {
    for (size_t i = start; i < ops.size(); ++i)
        if (!to_eltwise(ops[i], &problem->post_ops[problem->num_post_ops++])) return false;
    return true;
}

// The kernel size, strides, padding and dilation of a 2-D convolution, into an own kernel's
// problem (own_kernels::Problem or Grouped: the same field names).
template <class KernelProblem>
void set_window(const ConvParams &p, int64_t kh, int64_t kw, KernelProblem *problem) {
    problem->kh = kh;
    problem->kw = kw;
    problem->stride_h = p.stride[0];
    problem->stride_w = p.stride[1];
    problem->pad_h = p.padding[0];
    problem->pad_w = p.padding[1];
    problem->dilation_h = p.dilation[0];
    problem->dilation_w = p.dilation[1];
}

// The batch and the spatial sizes of one call (src n x c x ih x iw), into an own kernel's problem.
template <class KernelProblem>
void set_sizes(const at::Tensor &src, const at::Tensor &dst, KernelProblem *problem) {
    problem->n = src.size(0);
    problem->ih = src.size(2);
    problem->iw = src.size(3);
    problem->oh = dst.size(2);
    problem->ow = dst.size(3);
}

// A 1x1 weight (n x k x 1 x 1) as own_kernels::Pointwise takes it: bf16, pairs of inputs by
// 16 outputs, n padded to 16 and k to 2; fp32, k x n padded to 16.
at::Tensor pack_pointwise(const at::Tensor &weight, bool bf16) {
    const int64_t n = weight.size(0), k = weight.size(1);
    const int64_t n16 = (n + 15) / 16 * 16, k2 = bf16 ? (k + 1) / 2 * 2 : k;
    at::Tensor w = at::zeros({n16, k2}, bf16 ? at::kBFloat16 : at::kFloat);
    w.slice(0, 0, n).slice(1, 0, k).copy_(weight.reshape({n, k}));
    return bf16 ? w.view({n16 / 16, 16, k2 / 2, 2}).permute({2, 0, 1, 3}).contiguous() : w.t().contiguous();
}

// A grouped weight (O x I x kh x kw, O = g x out) as own_kernels::Grouped takes it: [g][tile][h][w]
// of (bf16) pairs of inputs x 16 outputs x 2, or (fp32) inputs x 16. With `merged` groups per
// kernel group, each kernel group's weight is merged x (out x in) blocks on its diagonal, zeros
// elsewhere: the same channels in the same order, `merged` times the inputs per group.
at::Tensor pack_grouped(const at::Tensor &weight, bool bf16, int64_t g, int64_t merged) {
    const int64_t out = weight.size(0) / g, kh = weight.size(2), kw = weight.size(3);
    at::Tensor w = weight;
    if (merged > 1) {
        const int64_t in = weight.size(1);
        w = at::zeros({weight.size(0), in * merged, kh, kw}, weight.options());
        for (int64_t group = 0; group < g; ++group)
            w.narrow(0, group * out, out)
                .narrow(1, group % merged * in, in)
                .copy_(weight.narrow(0, group * out, out));
        g /= merged;
    }
    const int64_t per_group = w.size(0) / g, in = w.size(1), tiles = per_group / 16;
    if (bf16)
        return w.to(at::kBFloat16)
            .reshape({g, tiles, 16, in / 2, 2, kh, kw})
            .permute({0, 1, 5, 6, 3, 2, 4})
            .contiguous();
    return w.to(at::kFloat).reshape({g, tiles, 16, in, kh, kw}).permute({0, 1, 4, 5, 3, 2}).contiguous();
}

// How many groups of `out` outputs the grouped kernel takes as one (1: as they are), or 0 when
// it cannot compute them: groups of fewer than 16 outputs that divide 16 (2 at least: not
// depthwise) merge 16 / out at a time when the groups divide by that.
int64_t grouped_merge(bool bf16, int64_t g, int64_t in, int64_t out, int64_t taps) {
    if (own_kernels::grouped_fits(bf16, in, out, taps)) return 1;
    if (out < 2 || out >= 16 || 16 % out != 0 || g % (16 / out) != 0) return 0;
    const int64_t merged = 16 / out;
    return own_kernels::grouped_fits(bf16, in * merged, 16, taps) ? merged : 0;
}

}  // namespace

std::optional<own_kernels::Choice> own_choice(const ComputeTypes &types, bool (*available)(bool bf16)) {
    const bool bf16 = types.math == at::kBFloat16;
    if (types.fpmath_bf16 || types.output != types.math || (!bf16 && types.math != at::kFloat) || !available(bf16))
        return std::nullopt;
    const auto choice = own_kernels::choice_from_env(std::getenv(own_kernels::kChoiceVariable));
    if (choice == own_kernels::Choice::onednn) return std::nullopt;
    return choice;
}

void ConvolutionContext::plan_kernels() {
    plan_stem();
    if (stem_) {  // the one own kernel of a stem
        depthwise_.reset();
        pointwise_.reset();
        grouped_.reset();
        winograd_.reset();
        split_.reset();
        return;
    }
    plan_depthwise();
    plan_pointwise();
    plan_grouped();
    plan_winograd();
    plan_split();
}

void ConvolutionContext::plan_depthwise() {
    depthwise_.reset();
    const ComputeTypes types = compute_types(dtype_);
    const int64_t g = params_.groups;
    const bool depthwise = !params_.transposed && spatial_dims() == 2 && g > 1 && weight_.size(0) == g &&
                           weight_.size(1) == 1;
    const bool bf16 = types.math == at::kBFloat16;
    if (!depthwise || post_ops_.size() > own_kernels::Problem::kMaxPostOps) return;
    const auto choice = own_choice(types, own_kernels::depthwise_available);
    if (!choice) return;
    auto plan = std::make_shared<Depthwise>();
    plan->choice = *choice;
    auto &problem = plan->problem;
    if (!add_post_ops(post_ops_, 0, &problem)) return;
    const int64_t kh = weight_.size(2), kw = weight_.size(3);
    // kh x kw x c, then zeros: the kernel reads whole vectors of the last row past c.
    const at::Tensor taps = weight_.to(types.math).to(at::kFloat).reshape({g, kh * kw}).t().reshape({-1});
    plan->weight = at::cat({taps, at::zeros({own_kernels::Problem::kWeightPadding}, taps.options())});
    if (bias_.defined()) plan->bias = (bf16 ? bias_bf16_.to(at::kFloat) : bias_).contiguous();
    if (bf16 && own_kernels::weight_pairs_used(kw, params_.stride[1], params_.dilation[1])) {
        plan->weight_pairs = at::empty({own_kernels::weight_pairs_size(kh, kw, g)}, at::kShort);
        own_kernels::pack_weight_pairs(plan->weight.data_ptr<float>(), kh, kw, g,
                                       reinterpret_cast<uint16_t *>(plan->weight_pairs.data_ptr<int16_t>()));
        problem.weight_pairs_blocks = own_kernels::weight_pairs_blocks(g);
    }
    if (!own_kernels::available(bf16)) {  // the AVX2 build runs it, reading the blocks only
        plan->weight_blocks = at::empty({own_kernels::weight_blocks_size(kh, kw, g)}, at::kFloat);
        own_kernels::pack_weight_blocks(plan->weight.data_ptr<float>(), kh, kw, g,
                                        plan->weight_blocks.data_ptr<float>());
        plan->weight = at::Tensor();
    }
    problem.bf16_in = problem.bf16_out = bf16;
    problem.c = g;
    set_window(params_, kh, kw, &problem);
    depthwise_ = plan;
}

void ConvolutionContext::run_depthwise(const at::Tensor &src, const at::Tensor &dst) const {
    own_kernels::Problem p = depthwise_->problem;
    p.src = src.data_ptr();
    p.dst = dst.data_ptr();
    if (depthwise_->weight.defined()) p.weight = depthwise_->weight.data_ptr<float>();
    if (depthwise_->weight_pairs.defined())
        p.weight_pairs = reinterpret_cast<const uint16_t *>(depthwise_->weight_pairs.data_ptr<int16_t>());
    if (depthwise_->weight_blocks.defined()) p.weight_blocks = depthwise_->weight_blocks.data_ptr<float>();
    p.bias = depthwise_->bias.defined() ? depthwise_->bias.data_ptr<float>() : nullptr;
    set_sizes(src, dst, &p);
    own_kernels::run(p);
}

void ConvolutionContext::plan_pointwise() {
    pointwise_.reset();
    const ComputeTypes types = compute_types(dtype_);
    const auto &p = params_;
    const bool one_by_one = !p.transposed && spatial_dims() == 2 && p.groups == 1 && weight_.size(2) == 1 &&
                            weight_.size(3) == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 &&
                            p.padding[1] == 0;
    const bool bf16 = types.math == at::kBFloat16;
    if (!one_by_one || post_ops_.size() > own_kernels::Problem::kMaxPostOps || weight_.size(1) > kPointwiseMaxChannels)
        return;
    const auto choice = own_choice(types, own_kernels::available);
    if (!choice) return;
    auto plan = std::make_shared<Pointwise>();
    plan->choice = *choice;
    // A residual sum first in the list (no activation before it): ResNet bottlenecks' last 1x1
    // convolution, which oneDNN 2.6's bf16 brgconv_1x1 runs at 30-60% of the peak with the sum.
    auto &problem = plan->problem;
    problem.sum = !post_ops_.empty() && post_ops_[0].kind == "sum";
    problem.sum_scale = problem.sum ? static_cast<float>(post_ops_[0].alpha) : 1.f;
    if (!add_post_ops(post_ops_, problem.sum ? 1 : 0, &problem.activation)) return;
    problem.bf16 = problem.activation.bf16_in = problem.activation.bf16_out = bf16;
    const int64_t n = weight_.size(0);
    if (bias_.defined()) {
        plan->bias = at::zeros({(n + 15) / 16 * 16}, at::kFloat);
        plan->bias.slice(0, 0, n).copy_(bf16 ? bias_bf16_ : bias_);
    }
    pointwise_ = plan;
}

size_t ConvolutionContext::pointwise_weight_bytes() const { return pointwise_ ? pointwise_->packed.bytes() : 0; }

size_t ConvolutionContext::grouped_weight_bytes() const { return grouped_ ? grouped_->weight.bytes() : 0; }

void ConvolutionContext::run_pointwise(const at::Tensor &src, const at::Tensor &dst) const {
    own_kernels::Pointwise p = pointwise_->problem;
    p.src = src.data_ptr();
    p.dst = dst.data_ptr();
    p.weight = pointwise_->packed.get([&] { return pack_pointwise(weight_, p.bf16); }).data_ptr();
    p.bias = pointwise_->bias.defined() ? pointwise_->bias.data_ptr<float>() : nullptr;
    p.m = src.size(0) * src.size(2) * src.size(3);
    p.k = src.size(1);
    p.n = dst.size(1);
    own_kernels::run_pointwise(p);
}

void ConvolutionContext::plan_grouped() {
    grouped_.reset();
    const ComputeTypes types = compute_types(dtype_);
    const auto &p = params_;
    const bool bf16 = types.math == at::kBFloat16;
    const int64_t g = p.groups;
    if (p.transposed || spatial_dims() != 2 || depthwise_ || post_ops_.size() > own_kernels::Problem::kMaxPostOps)
        return;
    const int64_t out = weight_.size(0) / g, in = weight_.size(1), kh = weight_.size(2), kw = weight_.size(3);
    const int64_t merged = grouped_merge(bf16, g, in, out, kh * kw);
    if (merged == 0) return;
    const auto choice = own_choice(types, own_kernels::grouped_available);
    if (!choice) return;
    // One group (a dense convolution) only where the kernel's AVX2 build runs (fp32 without
    // AVX-512): oneDNN 2.6's AVX2 kernels run channels-last layers at 40-70% of the FMA peak.
    if (g == 1 && own_kernels::available(bf16)) return;
    auto plan = std::make_shared<Grouped>();
    plan->choice = *choice;
    auto &problem = plan->problem;
    // A residual sum first in the list (fuse_conv_sum's: no activation before it) where the AVX2
    // build runs: ResNet basic blocks' 3x3 convolutions, which oneDNN 2.6's AVX2 kernel runs
    // channels-last at 50-65% of the FMA peak.
    const bool sum = !post_ops_.empty() && post_ops_[0].kind == "sum";
    if (sum && own_kernels::available(bf16)) return;
    problem.sum = sum;
    problem.sum_scale = sum ? static_cast<float>(post_ops_[0].alpha) : 1.f;
    if (!add_post_ops(post_ops_, sum ? 1 : 0, &problem.activation)) return;
    if (bias_.defined()) plan->bias = (bf16 ? bias_bf16_.to(at::kFloat) : bias_).contiguous();
    problem.bf16 = bf16;
    plan->merged = merged;
    problem.groups = g / merged;
    problem.in_per_group = in * merged;
    problem.out_per_group = out * merged;
    set_window(p, kh, kw, &problem);
    grouped_ = plan;
}

void ConvolutionContext::run_grouped(const at::Tensor &src, const at::Tensor &dst) const {
    own_kernels::Grouped p = grouped_->problem;
    p.src = src.data_ptr();
    p.dst = dst.data_ptr();
    p.weight = grouped_->weight
                   .get([&] { return pack_grouped(weight_, p.bf16, p.groups * grouped_->merged, grouped_->merged); })
                   .data_ptr();
    p.bias = grouped_->bias.defined() ? grouped_->bias.data_ptr<float>() : nullptr;
    set_sizes(src, dst, &p);
    own_kernels::run_grouped(p);
}

void ConvolutionContext::plan_split() {
    split_.reset();
    if (depthwise_ || pointwise_ || grouped_ || winograd_ || post_ops_.empty() || tensor_post_op(post_ops_) >= 0) return;
    // The trailing activations the kernel computes, when they hold an exp (sigmoid, SiLU):
    // those are where oneDNN's fused post-op costs more than the convolution itself.
    size_t start = post_ops_.size();
    own_kernels::Act act;
    while (start > 0 && post_ops_.size() - start < own_kernels::Problem::kMaxPostOps &&
           own_kernels::to_act(post_ops_[start - 1].kind, &act))
        --start;
    bool has_exp = false;
    for (size_t i = start; i < post_ops_.size(); ++i)
        has_exp |= post_ops_[i].kind == "silu" || post_ops_[i].kind == "sigmoid";
    if (!has_exp) return;
    const ComputeTypes types = compute_types(dtype_);
    const auto choice = own_choice(types, own_kernels::available);
    if (!choice) return;
    auto plan = std::make_shared<Split>();
    plan->choice = *choice;
    plan->activation.bf16_in = plan->activation.bf16_out = types.math == at::kBFloat16;
    add_post_ops(post_ops_, start, &plan->activation);  // each converts: `start` stopped before any that does not
    auto head = changed_copy();
    head->post_ops_.resize(start);
    head->depthwise_.reset();
    head->split_.reset();
    plan->head = head;
    split_ = plan;
}

void ConvolutionContext::run_split(const at::Tensor &src, const at::Tensor &dst) const {
    split_->head->execute_into(src, dst);
    own_kernels::run_post_ops(split_->activation, dst.data_ptr(), dst.numel());
}

void ConvolutionContext::plan_stem() {
    stem_.reset();
    const ComputeTypes types = compute_types(dtype_);
    const auto &p = params_;
    if (types.math != at::kBFloat16 || p.transposed || spatial_dims() != 2 || tensor_post_op(post_ops_) >= 0 ||
        post_ops_.size() > own_kernels::Problem::kMaxPostOps ||
        !own_stem::fits(in_channels(), weight_.size(2), weight_.size(3), p.groups, p.dilation))
        return;
    const auto choice = own_choice(types, [](bool bf16) { return bf16 && own_stem::available(); });
    if (!choice) return;
    own_kernels::Problem activation;
    if (!add_post_ops(post_ops_, 0, &activation)) return;
    auto plan = std::make_shared<Stem>();
    plan->choice = *choice;
    plan->plan = own_stem::make_plan(weight_, bias_.defined() ? bias_bf16_.to(at::kFloat) : at::Tensor(), p.stride,
                                     p.padding, activation);
    stem_ = plan;
}

bool ConvolutionContext::stem_reads(const at::Tensor &x) const {
    return stem_ && x.dim() == 4 && x.scalar_type() == at::kFloat && x.is_contiguous();
}

void ConvolutionContext::run_stem(const at::Tensor &src, const at::Tensor &dst) const {
    own_stem::Source from;
    if (stem_reads(src)) {
        from.planes = src.data_ptr<float>();
    } else {
        TORCH_CHECK(src.scalar_type() == at::kBFloat16 && is_channels_last(src),
                    "ipex convolution: the stem kernel reads fp32 planes or channels-last bf16");
        from.bf16_last = reinterpret_cast<const uint16_t *>(src.data_ptr<at::BFloat16>());
    }
    TORCH_CHECK(dst.scalar_type() == at::kBFloat16 && is_channels_last(dst),
                "ipex convolution: the stem kernel writes channels-last bf16");
    own_stem::run(stem_->plan, from, src.size(0), src.size(2), src.size(3), dst.size(2), dst.size(3),
                  reinterpret_cast<uint16_t *>(dst.data_ptr<at::BFloat16>()));
}

}  // namespace ipex::ops
