// Shared helpers of the prepacked-op tests: fp64 references, error metrics, layouts.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/conv_context.h"
#include "ops/own_kernels.h"
#include "ops/linear_context.h"

namespace ipex::ops::testing {

// Sets an environment variable for one scope (nullptr unsets it), then puts back what was there.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old, had_ = true;
        if (value) setenv(name, value, 1); else unsetenv(name);
    }
    ~ScopedEnv() {
        if (had_) setenv(name_.c_str(), old_.c_str(), 1); else unsetenv(name_.c_str());
    }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    std::string name_, old_;
    bool had_ = false;
};

// Sets IPEX_CONV_KERNELS for one scope (contexts read it when built): "0" or "1" make the
// kernel choice fixed, so two contexts compute the same bits; nullptr unsets it.
class KernelChoice : public ScopedEnv {
public:
    explicit KernelChoice(const char *value) : ScopedEnv(own_kernels::kChoiceVariable, value) {}
};

// max |got - want| / max |want|, both in fp64.
inline double max_relative_error(const at::Tensor &got, const at::Tensor &want) {
    if (got.sizes() != want.sizes()) return 1e30;
    const at::Tensor a = got.to(at::kDouble), b = want.to(at::kDouble);
    const double scale = std::max(b.abs().max().item<double>(), 1e-12);
    return (a - b).abs().max().item<double>() / scale;
}

inline double cosine(const at::Tensor &got, const at::Tensor &want) {
    if (got.sizes() != want.sizes()) return -1.0;
    const at::Tensor a = got.to(at::kDouble).reshape({-1}), b = want.to(at::kDouble).reshape({-1});
    const double norms = a.norm().item<double>() * b.norm().item<double>();
    if (norms == 0.0) return a.equal(b) ? 1.0 : 0.0;
    return (a * b).sum().item<double>() / norms;
}

constexpr double kFp32MaxRelative = 1e-4;
constexpr double kLowpMaxRelative = 3e-2;
constexpr double kLowpMinCosine = 0.9999;

// Asserts `got` against an fp64 reference with the tolerance of the context dtype.
inline void expect_close(const at::Tensor &got, const at::Tensor &want, const std::string &dtype,
                         const std::string &what) {
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    const double rel = max_relative_error(got, want);
    if (dtype == "fp32") {
        EXPECT_LE(rel, kFp32MaxRelative) << what;
    } else {
        EXPECT_LE(rel, kLowpMaxRelative) << what;
        EXPECT_GE(cosine(got, want), kLowpMinCosine) << what;
    }
}

// |got - want| within the dtype's bound for every element, and no NaN: bf16, the output
// rounding (2^-9 relative) plus fp32 sums of bf16 products (1/256 of the value and 1e-4 of the
// output's largest); fp32, 1e-5 of both. `roundings`: 2 when want was rounded to the dtype too.
inline void expect_within_rounding(const at::Tensor &got, const at::Tensor &want, const std::string &dtype,
                                   const std::string &what, double roundings = 1) {
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
    const double scale = std::max(w.abs().max().item<double>(), 1e-12);
    const double rel = (dtype == "bf16" ? 1.0 / 256 : 1e-5) * roundings, abs = dtype == "bf16" ? 1e-4 : 1e-5;
    const at::Tensor excess = (g - w).abs() - (w.abs() * rel + abs * scale);
    EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": max error " << (g - w).abs().max().item<double>()
                                                << " at scale " << scale;
    EXPECT_FALSE(g.isnan().any().item<bool>()) << what;
}

// The dtype the op returns for a context dtype (before promotion by a tensor post-op).
inline at::ScalarType output_type(const std::string &dtype) {
    return dtype == "bf16" ? at::kBFloat16 : at::kFloat;
}

// Channels-last (N, spatial..., C in memory) for any rank >= 3.
inline bool channels_last(const at::Tensor &t) {
    if (t.dim() == 4) return t.is_contiguous(at::MemoryFormat::ChannelsLast);
    if (t.dim() == 5) return t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
    return t.dim() == 3 && t.permute({0, 2, 1}).is_contiguous();
}

// A copy of `t` laid out channels-last (rank 3 to 5).
inline at::Tensor as_channels_last(const at::Tensor &t) {
    if (t.dim() == 4) return t.contiguous(at::MemoryFormat::ChannelsLast);
    if (t.dim() == 5) return t.contiguous(at::MemoryFormat::ChannelsLast3d);
    return t.permute({0, 2, 1}).contiguous().permute({0, 2, 1});
}

// The post-ops in fp64, as aten defines them (the eltwise kinds the own kernels compute, and gelu_erf).
inline at::Tensor reference_post_ops(at::Tensor y, const PostOps &ops) {
    for (const auto &op : ops) {
        if (op.kind == "relu") y = at::relu(y);
        else if (op.kind == "leaky_relu") y = at::leaky_relu(y, op.alpha);
        else if (op.kind == "clip") y = at::clamp(y, op.alpha, op.beta);
        else if (op.kind == "silu") y = y * at::sigmoid(y);
        else if (op.kind == "sigmoid") y = at::sigmoid(y);
        else if (op.kind == "hardswish") y = at::hardswish(y);
        else if (op.kind == "gelu_erf") y = at::gelu(y);
        else ADD_FAILURE() << "no reference for " << op.kind;
    }
    return y;
}

// fp64 aten convolution (or transposed convolution) of fp32 tensors.
inline at::Tensor reference_conv(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &bias,
                                 const ConvParams &p) {
    const at::Tensor b = bias.defined() ? bias.to(at::kDouble) : at::Tensor();
    std::vector<int64_t> output_padding = p.output_padding;
    if (output_padding.empty()) output_padding.assign(p.stride.size(), 0);
    return at::convolution(x.to(at::kDouble), weight.to(at::kDouble), b, p.stride, p.padding, p.dilation,
                           p.transposed, output_padding, p.groups);
}

// A convolution whose post-ops start with a residual sum (post[0], its scale in alpha) run on
// channels-last x with a random summand: into a copy (the summand left as it was) and in place
// (into the summand itself), each checked by `close(got, want, what)` against the fp64
// convolution `conv` plus the scaled summand, then the post-ops after the sum.
template <class Close>
void expect_sum_into_copy_and_in_place(const ConvolutionContext &ctx, const at::Tensor &x, const at::Tensor &conv,
                                       const PostOps &post, const std::string &what, Close close) {
    const at::Tensor other = as_channels_last(at::randn(conv.sizes()));
    const at::Tensor want =
        reference_post_ops(conv + post[0].alpha * other.to(at::kDouble), PostOps(post.begin() + 1, post.end()));
    const at::Tensor kept = other.clone();
    const at::Tensor copy = ctx.run(as_channels_last(x), other, /*may_write_other=*/false);
    EXPECT_TRUE(other.equal(kept)) << what << ": the summand was written";
    close(copy, want, what + " (a copy)");
    const at::Tensor in_place = ctx.run(as_channels_last(x), other);
    EXPECT_EQ(in_place.data_ptr(), other.data_ptr()) << what;
    close(in_place, want, what + " (in place)");
}

inline at::Tensor reference_linear(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &bias) {
    return at::linear(x.to(at::kDouble), weight.to(at::kDouble),
                      bias.defined() ? bias.to(at::kDouble) : at::Tensor());
}

// The post-op applied with aten in fp64 (elementwise kinds only).
inline at::Tensor reference_eltwise(const at::Tensor &y, const PostOp &op) {
    if (op.kind == "relu") return at::relu(y);
    if (op.kind == "leaky_relu") return at::leaky_relu(y, op.alpha);
    if (op.kind == "clip") return at::clamp(y, op.alpha, op.beta);
    if (op.kind == "gelu_erf") return at::gelu(y, "none");
    if (op.kind == "gelu_tanh") return at::gelu(y, "tanh");
    if (op.kind == "silu") return at::silu(y);
    if (op.kind == "sigmoid") return at::sigmoid(y);
    if (op.kind == "tanh") return at::tanh(y);
    if (op.kind == "hardswish") return at::hardswish(y);
    if (op.kind == "elu") return at::elu(y, op.alpha);
    ADD_FAILURE() << "no reference for post-op " << op.kind;
    return y;
}

// The c10::Error message of `fn`, or "" when it does not throw one.
template <class Fn>
std::string error_of(Fn &&fn) {
    try {
        fn();
    } catch (const c10::Error &e) {
        return e.what_without_backtrace();
    }
    return "";
}

// The message of any exception `fn` throws (the TorchScript interpreter rethrows op errors
// as std::runtime_error with a script traceback), or "".
template <class Fn>
std::string any_error_of(Fn &&fn) {
    try {
        fn();
    } catch (const std::exception &e) {
        return e.what();
    }
    return "";
}

// TorchScript source compiled from C++ resolves only `torch.<aten op>`; this resolver also
// understands `torch.ops.<namespace>.<op>` (as Python and the model loader do), so test
// modules can call the ipex ops the way a user's script does.
struct OpsNamespace : torch::jit::SugaredValue {
    std::string kind() const override { return "torch.ops"; }
    std::shared_ptr<torch::jit::SugaredValue> attr(const torch::jit::SourceRange &, torch::jit::GraphFunction &,
                                                   const std::string &field) override {
        return std::make_shared<torch::jit::BuiltinModule>(field);
    }
};

struct TorchWithOps : torch::jit::BuiltinModule {
    TorchWithOps() : BuiltinModule("aten") {}
    std::shared_ptr<torch::jit::SugaredValue> attr(const torch::jit::SourceRange &loc, torch::jit::GraphFunction &m,
                                                   const std::string &field) override {
        if (field == "ops") return std::make_shared<OpsNamespace>();
        return BuiltinModule::attr(loc, m, field);
    }
};

struct OpsResolver : torch::jit::Resolver {
    std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string &name, torch::jit::GraphFunction &,
                                                           const torch::jit::SourceRange &) override {
        if (name == "torch") return std::make_shared<TorchWithOps>();
        return nullptr;
    }
    c10::TypePtr resolveType(const std::string &, const torch::jit::SourceRange &) override { return nullptr; }
};

// module.define(source) with torch.ops available.
inline void define(torch::jit::Module &module, const std::string &source) {
    module.define(source, std::make_shared<OpsResolver>());
}

}  // namespace ipex::ops::testing
