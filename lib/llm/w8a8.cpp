#include "llm/w8a8.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>

#include "llm/kernels.h"
#include "ops/int8/int8_context.h"
#include "ops/onednn_utils.h"
#include "ops/primitive_cache.h"

namespace ipex::llm {

namespace {
constexpr int kActMax = 127;        // symmetric int8 activations: [-127, 127]
constexpr int kPerOutputMask = 1 << 1;  // output scales per column of dst [M, N]
}  // namespace

struct W8A8Linear::Primitive {
    dnnl::matmul matmul;
    dnnl::memory::desc src, weight, dst, scratchpad;
    std::string impl;
    bool reference = false;  // oneDNN has only its reference loops for it: run ours instead
};

struct W8A8Linear::Cache {
    ops::PrimitiveCache<Primitive, 32> primitives;
};

W8A8Linear::W8A8Linear(const std::string &name, const at::Tensor &weight, const at::Tensor &bias, double act_scale,
                       const at::Tensor &inv_smooth)
    : name_(name), act_scale_(act_scale), cache_(std::make_shared<Cache>()) {
    TORCH_INTERNAL_ASSERT(weight.dim() == 2 && act_scale > 0, "W8A8Linear: weight [N, K] and a scale > 0");
    const int64_t n = weight.size(0), k = weight.size(1);
    weight_max_ = static_cast<int>(std::floor(kActMax / quant::int8_weight_scale_factor(at::kQInt8, "linear", 1)));
    const at::Tensor w = weight.to(at::kFloat).contiguous();
    // Per output channel: scale = max |w| / weight_max (a zero row gets scale 1, all q 0).
    at::Tensor amax = w.abs().amax(1);
    weight_scales_ = at::where(amax > 0, amax / weight_max_, at::ones_like(amax)).contiguous();
    qweight_ = at::clamp(at::round(w / weight_scales_.unsqueeze(1)), -weight_max_, weight_max_).to(at::kChar).contiguous();
    const float *ws = weight_scales_.data_ptr<float>();
    output_scales_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) output_scales_[static_cast<size_t>(i)] = static_cast<float>(act_scale * ws[i]);
    multiplier_ = inv_smooth.defined() ? (inv_smooth.to(at::kDouble) / act_scale).to(at::kFloat).contiguous()
                                       : at::full({k}, static_cast<float>(1.0 / act_scale), at::kFloat);
    if (bias.defined()) bias_ = bias.to(at::kFloat).reshape({n}).contiguous();
}

at::Tensor W8A8Linear::quantize_input(const at::Tensor &x) const {
    const bool bf16 = x.scalar_type() == at::kBFloat16;
    const at::Tensor src = bf16 ? x.contiguous() : x.to(at::kFloat).contiguous();
    const int64_t rows = src.size(0), k = src.size(1);
    at::Tensor q = at::empty({rows, k}, at::kChar);
    const float *m = multiplier_.data_ptr<float>();
    int8_t *out = q.data_ptr<int8_t>();
    at::parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            if (bf16) {
                kernels::quantize_row_s8(static_cast<const uint16_t *>(src.data_ptr()) + r * k, m, out + r * k, k);
            } else {
                kernels::quantize_row_s8(src.data_ptr<float>() + r * k, m, out + r * k, k);
            }
        }
    });
    return q;
}

std::shared_ptr<const W8A8Linear::Primitive> W8A8Linear::primitive(int64_t rows) const {
    const ops::CacheKey key{rows};
    if (auto p = cache_->primitives.find(key)) return p;
    const int64_t n = qweight_.size(0), k = qweight_.size(1);
    using dt = dnnl::memory::data_type;
    auto p = std::make_shared<Primitive>();
    p->src = dnnl::memory::desc({rows, k}, dt::s8, dnnl::memory::format_tag::ab);
    // The plain [N, K] weight read in place as [K, N] with strides (1, K): held once.
    p->weight = dnnl::memory::desc({k, n}, dt::s8, dnnl::memory::dims{1, k});
    p->dst = dnnl::memory::desc({rows, n}, dt::f32, dnnl::memory::format_tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_output_scales(kPerOutputMask, output_scales_);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p->src, p->weight, p->dst), attr, ops::cpu_engine());
    p->impl = pd.impl_info_str();
    p->reference = ops::is_reference(pd);
    p->scratchpad = pd.scratchpad_desc();
    p->matmul = dnnl::matmul(pd);
    return cache_->primitives.put_if_absent(key, std::move(p));
}

at::Tensor W8A8Linear::reference(const at::Tensor &q) const {
    // int8 products summed in fp32 (exact while the sums stay under 2^24), then scaled.
    at::Tensor acc = at::mm(q.to(at::kFloat), qweight_.to(at::kFloat).t());
    return acc.mul_(weight_scales_.unsqueeze(0) * static_cast<float>(act_scale_));
}

at::Tensor W8A8Linear::forward(const at::Tensor &x) const {
    TORCH_CHECK(x.dim() == 2 && x.size(1) == qweight_.size(1), "W8A8Linear '", name_, "': input has ", x.size(-1),
                " features, expected ", qweight_.size(1));
    const at::Tensor q = quantize_input(x);
    const int64_t rows = q.size(0), n = qweight_.size(0);
    at::Tensor out;
    const auto p = primitive(rows);
    if (p->reference) {
        out = reference(q);
    } else {
        out = at::empty({rows, n}, at::kFloat);
        ops::execute(p->matmul, p->scratchpad,
                     {{DNNL_ARG_SRC, ops::wrap(q, p->src)},
                      {DNNL_ARG_WEIGHTS, ops::wrap(qweight_, p->weight)},
                      {DNNL_ARG_DST, ops::wrap(out, p->dst)}});
    }
    if (bias_.defined()) out.add_(bias_);
    return out;
}

uint64_t W8A8Linear::bytes() const {
    uint64_t b = static_cast<uint64_t>(qweight_.nbytes() + weight_scales_.nbytes() + multiplier_.nbytes());
    if (bias_.defined()) b += static_cast<uint64_t>(bias_.nbytes());
    return b;
}

std::string W8A8Linear::implementation() const {
    const auto p = primitive(1);
    return p->reference ? std::string("reference") : "onednn " + p->impl;
}

InputObserver::InputObserver(std::string name, const at::Tensor &weight) : name_(std::move(name)) {
    const at::Tensor wmax = weight.to(at::kFloat).abs().amax(0).contiguous();
    weight_max_.assign(wmax.data_ptr<float>(), wmax.data_ptr<float>() + wmax.numel());
    act_max_.assign(weight_max_.size(), 0.f);
}

void InputObserver::observe(const at::Tensor &x) {
    const at::Tensor m = x.to(at::kFloat).reshape({-1, x.size(-1)}).abs().amax(0).contiguous();
    TORCH_INTERNAL_ASSERT(static_cast<size_t>(m.numel()) == act_max_.size(), "InputObserver: channel count");
    const float *v = m.data_ptr<float>();
    std::lock_guard<std::mutex> lock(mutex_);
    // NaN propagates: a NaN activation makes the channel NaN and the calibration refuses it.
    for (size_t j = 0; j < act_max_.size(); ++j)
        if (std::isnan(v[j]) || v[j] > act_max_[j]) act_max_[j] = v[j];
    rows_ += x.numel() / x.size(-1);
}

std::vector<float> InputObserver::act_max() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return act_max_;
}

int64_t InputObserver::rows() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return rows_;
}

}  // namespace ipex::llm
