#include "ops/pool_op.h"

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include "base/isa.h"
#include "ops/own_kernels.h"
#include "ops/onednn_utils.h"
#include "ops/op_errors.h"

namespace ipex::ops {
namespace {

// One pooling problem, per spatial dim (H, W); dilation as aten counts it (1: no gaps).
struct PoolPlan {
    std::array<int64_t, 2> kernel, stride, dilation, pad_l, pad_r, out;
    bool channels_last = false;
};

// A list of one value or one per dim, as aten takes them; `fallback` for an empty one.
std::optional<std::array<int64_t, 2>> per_dim(at::IntArrayRef v, std::optional<std::array<int64_t, 2>> fallback) {
    if (v.empty()) return fallback;
    if (v.size() == 1) return std::array<int64_t, 2>{v[0], v[0]};
    if (v.size() == 2) return std::array<int64_t, 2>{v[0], v[1]};
    return std::nullopt;
}

}  // namespace

std::optional<PoolWindow> pool_window(at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                      at::IntArrayRef dilation) {
    const auto k = per_dim(kernel_size, std::nullopt);
    if (!k) return std::nullopt;
    const auto s = per_dim(stride, k), p = per_dim(padding, std::nullopt), d = per_dim(dilation, std::nullopt);
    if (!s || !p || !d) return std::nullopt;
    for (int i = 0; i < 2; ++i)  // aten's own checks
        if ((*k)[i] <= 0 || (*s)[i] <= 0 || (*d)[i] <= 0 || (*p)[i] < 0 || (*p)[i] > (*k)[i] / 2) return std::nullopt;
    return PoolWindow{*k, *s, *p, *d};
}

int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    const int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    if (span < 0) return 0;
    int64_t out = span / s + 1;
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    return out;
}

namespace {

// The pooling's geometry when ipex's own code may run it (a 4-D fp32 or bf16 input, NCHW or
// channels-last, arguments aten takes), else nothing: aten then runs it, errors included.
// pad_r is negative where the last window ends before the input does.
std::optional<PoolPlan> plan(const at::Tensor &x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                             at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
    if (x.dim() != 4 || x.numel() == 0) return std::nullopt;
    if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16) return std::nullopt;
    // Arguments aten rejects go to aten for its error.
    const auto w = pool_window(kernel_size, stride, padding, dilation);
    if (!w) return std::nullopt;
    PoolPlan plan;
    plan.channels_last = is_channels_last(x);
    if (!plan.channels_last && !x.is_contiguous()) return std::nullopt;
    for (int i = 0; i < 2; ++i) {
        const int64_t in = x.size(2 + i);
        const int64_t ki = w->kernel[i], si = w->stride[i], pi = w->padding[i], di = w->dilation[i];
        const int64_t out = pooled_size(in, ki, si, pi, di, ceil_mode);
        if (out <= 0) return std::nullopt;
        const int64_t pad_r = (out - 1) * si + di * (ki - 1) + 1 - in - pi;
        plan.kernel[i] = ki;
        plan.stride[i] = si;
        plan.dilation[i] = di;
        plan.pad_l[i] = pi;
        plan.pad_r[i] = pad_r;
        plan.out[i] = out;
    }
    return plan;
}

// Whether p[begin..end) holds `value`: an OR of all-ones compare masks in T itself, which the
// compiler vectorizes into compares and ORs (a count in int64 made it widen every mask to 64
// bits: the scan cost 3.7% of SqueezeNet's bf16 forward).
template <class T>
bool holds(const T *p, int64_t begin, int64_t end, T value) {
    T seen = 0;
    for (int64_t i = begin; i < end; ++i) seen |= static_cast<T>(p[i] == value ? ~T{0} : T{0});
    return seen != 0;
}

// Whether a dense fp32 or bf16 tensor holds the lowest finite value of its dtype (compared
// as bits: the one pattern of that value in either dtype), its chunks checked in parallel.
bool has_lowest(const at::Tensor &t) {
    const int64_t n = t.numel();
    constexpr int64_t kGrain = 1 << 16;
    const auto chunks_holding = [&](auto *p, auto lowest) {
        return at::parallel_reduce(
            0, n, kGrain, int64_t{0},
            [&](int64_t begin, int64_t end, int64_t found) { return found + holds(p, begin, end, lowest); },
            [](int64_t a, int64_t b) { return a + b; });
    };
    if (t.scalar_type() == at::kFloat) {
        const float lowest = std::numeric_limits<float>::lowest();
        uint32_t bits;
        std::memcpy(&bits, &lowest, sizeof bits);
        return chunks_holding(reinterpret_cast<const uint32_t *>(t.data_ptr<float>()), bits) > 0;
    }
    constexpr uint16_t kLowestBf16 = 0xff7f;
    return chunks_holding(reinterpret_cast<const uint16_t *>(t.data_ptr<at::BFloat16>()), kLowestBf16) > 0;
}

}  // namespace

bool spatial_mean_dims(at::IntArrayRef dim) {
    if (dim.size() != 2) return false;
    bool seen[2] = {false, false};
    for (int64_t d : dim) {
        if (d < -4 || d > 3) return false;
        const int64_t i = (d < 0 ? d + 4 : d) - 2;
        if (i < 0 || seen[i]) return false;
        seen[i] = true;
    }
    return true;
}

bool spatial_mean_uses_own_kernel(const at::Tensor &input, at::IntArrayRef dim) {
    const at::ScalarType type = input.scalar_type();
    return input.dim() == 4 && spatial_mean_dims(dim) && (type == at::kFloat || type == at::kBFloat16) &&
           input.numel() > 0 && input.is_contiguous(at::MemoryFormat::ChannelsLast);
}

namespace {

// The own kernel's mean of a 4-D channels-last fp32/bf16 input over its spatial dims: the
// AVX-512 build, or the portable one where the CPU has no AVX-512 or `portable` asks for it
// (aten's channels-last fp32 mean ran at 6.6 GB/s on an AVX2 EPYC: 8x320x14x14, 0.3 ms).
at::Tensor own_spatial_mean(const at::Tensor &input, bool keepdim, bool portable) {
    const int64_t n = input.size(0), c = input.size(1);
    at::Tensor out = at::empty(keepdim ? std::vector<int64_t>{n, c, 1, 1} : std::vector<int64_t>{n, c}, input.options());
    own_kernels::SpatialMean p;
    p.bf16 = input.scalar_type() == at::kBFloat16;
    p.src = input.data_ptr();
    p.dst = out.data_ptr();
    p.n = n;
    p.hw = input.size(2) * input.size(3);
    p.c = c;
    if (!portable && own_kernels::available(p.bf16))
        own_kernels::run_spatial_mean(p);
    else
        own_kernels::run_spatial_mean_portable(p);
    return out;
}

}  // namespace

at::Tensor spatial_mean(const at::Tensor &input, at::IntArrayRef dim, bool keepdim) {
    if (!spatial_mean_uses_own_kernel(input, dim)) return at::mean(input, dim, keepdim);
    return own_spatial_mean(input, keepdim, false);
}

at::Tensor spatial_mean_portable(const at::Tensor &input, bool keepdim) {
    TORCH_CHECK(spatial_mean_uses_own_kernel(input, {2, 3}), "spatial_mean_portable: not a 4-D channels-last ",
                "fp32/bf16 input");
    return own_spatial_mean(input, keepdim, true);
}

namespace {

// Which code runs a pooling of this plan: oneDNN's on AVX-512 CPUs, where a window the right
// padding would have to cut stays with aten (oneDNN takes no negative padding); elsewhere
// oneDNN's bf16 kernels are its reference code and its fp32 AVX2 ones took 2.1-2.7x aten's
// time (8x192x28x28 3x3 channels-last: 6.0 against 2.8 ms), so channels-last inputs run the
// own portable kernel and NCHW ones aten.
PoolPath path_of(const std::optional<PoolPlan> &p) {
    if (!p) return PoolPath::aten;
    if (isa::avx512()) return p->pad_r[0] >= 0 && p->pad_r[1] >= 0 ? PoolPath::onednn : PoolPath::aten;
    return p->channels_last ? PoolPath::own : PoolPath::aten;
}

// The own kernel's pooling of `input` into `out` (channels-last, of the plan's output sizes).
void max_pool2d_own(const at::Tensor &input, const PoolPlan &p, const at::Tensor &out) {
    own_kernels::MaxPool k;
    k.bf16 = input.scalar_type() == at::kBFloat16;
    k.src = input.data_ptr();
    k.dst = out.data_ptr();
    k.n = input.size(0);
    k.c = input.size(1);
    k.ih = input.size(2);
    k.iw = input.size(3);
    k.oh = p.out[0];
    k.ow = p.out[1];
    k.kh = p.kernel[0];
    k.kw = p.kernel[1];
    k.stride_h = p.stride[0];
    k.stride_w = p.stride[1];
    k.pad_h = p.pad_l[0];
    k.pad_w = p.pad_l[1];
    k.dilation_h = p.dilation[0];
    k.dilation_w = p.dilation[1];
    own_kernels::run_max_pool_portable(k);
}

at::Tensor empty_output(const at::Tensor &input, const PoolPlan &p) {
    const std::vector<int64_t> sizes{input.size(0), input.size(1), p.out[0], p.out[1]};
    return p.channels_last ? empty_channels_last(sizes, input.scalar_type()) : at::empty(sizes, input.options());
}

// The pooling of `input` written into `out` (the plan's output sizes and the input's layout and
// dtype) by the code `path` names.
void pool_into(const at::Tensor &input, const PoolPlan &p, PoolPath path, at::IntArrayRef kernel_size,
               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
               const at::Tensor &out) {
    if (path == PoolPath::aten) {
        out.copy_(at::max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode));
        return;
    }
    if (path == PoolPath::own) return max_pool2d_own(input, p, out);
    const dnnl::memory::desc src = strided_desc(input), dst = strided_desc(out);
    const dnnl::pooling_v2_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst, {p.stride[0], p.stride[1]},
        {p.kernel[0], p.kernel[1]}, {p.dilation[0] - 1, p.dilation[1] - 1},  // oneDNN counts the gaps
        {p.pad_l[0], p.pad_l[1]}, {p.pad_r[0], p.pad_r[1]});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // oneDNN's primitive cache makes the primitive once per shape.
    const dnnl::pooling_v2_forward::primitive_desc pd(desc, attr, cpu_engine());
    const dnnl::pooling_v2_forward primitive(pd);
    execute(primitive, pd.scratchpad_desc(), {{DNNL_ARG_SRC, wrap(input, src)}, {DNNL_ARG_DST, wrap(out, dst)}});
    // oneDNN starts each window at the lowest finite value, so a window of nothing but -inf
    // gives that instead of -inf: such outputs (and real lowest values, rarer still) are
    // computed again by aten, which is exact for both.
    if (has_lowest(out)) out.copy_(at::max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode));
}

}  // namespace

PoolPath max_pool2d_path(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
    return path_of(plan(input, kernel_size, stride, padding, dilation, ceil_mode));
}

at::Tensor max_pool2d_own_kernel(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
    const auto p = plan(input, kernel_size, stride, padding, dilation, ceil_mode);
    TORCH_CHECK(p && p->channels_last, "ipex::max_pool2d's own kernel takes a channels-last fp32 or bf16 4-D input "
                                       "and arguments aten takes");
    const at::Tensor out = empty_output(input, *p);
    max_pool2d_own(input, *p, out);
    return out;
}

at::Tensor max_pool2d(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
    const auto p = plan(input, kernel_size, stride, padding, dilation, ceil_mode);
    const PoolPath path = path_of(p);
    if (path == PoolPath::aten) return at::max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode);
    const at::Tensor out = empty_output(input, *p);
    pool_into(input, *p, path, kernel_size, stride, padding, dilation, ceil_mode, out);
    return out;
}

std::optional<std::vector<int64_t>> max_pool2d_sizes(const at::Tensor &input, at::IntArrayRef kernel_size,
                                                     at::IntArrayRef stride, at::IntArrayRef padding,
                                                     at::IntArrayRef dilation, bool ceil_mode) {
    const auto p = plan(input, kernel_size, stride, padding, dilation, ceil_mode);
    if (!p || !p->channels_last) return std::nullopt;
    return std::vector<int64_t>{input.size(0), input.size(1), p->out[0], p->out[1]};
}

void max_pool2d_into(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, const at::Tensor &out) {
    const auto p = plan(input, kernel_size, stride, padding, dilation, ceil_mode);
    TORCH_CHECK(p && p->channels_last && is_channels_last(out) && out.scalar_type() == input.scalar_type() &&
                    out.sizes() == at::IntArrayRef({input.size(0), input.size(1), p->out[0], p->out[1]}),
                "ipex::max_pool2d: cannot write the pooling of a ", input.sizes(), " input into a ",
                out.scalar_type(), " tensor of shape ", out.sizes());
    pool_into(input, *p, path_of(p), kernel_size, stride, padding, dilation, ceil_mode, out);
}

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("max_pool2d(Tensor input, int[] kernel_size, int[] stride, int[] padding, int[] dilation, "
          "bool ceil_mode) -> Tensor",
          IPEX_GUARDED(ipex::ops::max_pool2d));
    m.def("spatial_mean(Tensor input, int[] dim, bool keepdim) -> Tensor", IPEX_GUARDED(ipex::ops::spatial_mean));
}

}  // namespace ipex::ops
