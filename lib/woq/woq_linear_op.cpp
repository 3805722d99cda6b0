#include "woq/woq_linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <atomic>
#include <string>

#include "woq/woq_kernels.h"
#include "woq/woq_layout.h"

namespace ipex::woq {
namespace {

std::atomic<bool> g_force_portable{false};

// Output channels per parallel task.
constexpr int64_t kGrainRows = 16;

kernels::WeightView view_of(const at::Tensor &qweight, const at::Tensor &scales, const at::Tensor &zeros, int64_t bits,
                            int64_t group_size, int64_t k) {
    kernels::WeightView w;
    w.qweight = qweight.data_ptr<uint8_t>();
    w.scales = scales.data_ptr<float>();
    w.zeros = zeros.data_ptr<float>();
    w.n = qweight.size(0);
    w.k = k;
    w.kp = padded_in_features(k);
    w.groups = k / group_size;
    w.group_size = group_size;
    w.bits = static_cast<int>(bits);
    return w;
}

bool use_simd(const kernels::WeightView &w) {
    return !g_force_portable.load() && w.block_aligned() && kernels::avx512_usable();
}

// x [M, K] fp32 -> [M, Kp] zero padded.
at::Tensor pad_channels(const at::Tensor &x, int64_t kp) {
    if (x.size(1) == kp) return x.contiguous();
    return at::constant_pad_nd(x, {0, kp - x.size(1)}, 0);
}

at::Tensor gemv_f32(const kernels::WeightView &w, const at::Tensor &x2d) {
    const int64_t m = x2d.size(0);
    const at::Tensor x = pad_channels(x2d.to(at::kFloat), w.kp);
    const at::Tensor xsum = x.narrow(1, 0, w.k).reshape({m, w.groups, w.group_size}).sum(2).contiguous();
    at::Tensor out = at::empty({m, w.n}, at::kFloat);
    const kernels::GemvF32 a{x.data_ptr<float>(), xsum.data_ptr<float>(), m, out.data_ptr<float>(), w.n};
    const bool simd = use_simd(w);
    at::parallel_for(0, w.n, kGrainRows, [&](int64_t n0, int64_t n1) {
        if (simd) kernels::gemv_f32_avx512(w, a, n0, n1);
        else kernels::gemv_f32_ref(w, a, n0, n1);
    });
    return out;
}

at::Tensor gemv_s8(const kernels::WeightView &w, const at::Tensor &x2d) {
    const int64_t m = x2d.size(0);
    const at::Tensor xf = x2d.to(at::kFloat);
    at::Tensor scale = xf.abs().amax(1) / 127.0;
    scale = at::where(scale > 0, scale, at::ones_like(scale)).contiguous();
    const at::Tensor xq = pad_channels(at::round(xf / scale.unsqueeze(1)).clamp(-127, 127).to(at::kChar), w.kp);
    const at::Tensor xsum =
        xq.narrow(1, 0, w.k).to(at::kInt).reshape({m, w.groups, w.group_size}).sum(2, false, at::kInt).contiguous();
    at::Tensor out = at::empty({m, w.n}, at::kFloat);
    const kernels::GemvS8 a{xq.data_ptr<int8_t>(), scale.data_ptr<float>(), xsum.data_ptr<int32_t>(), m,
                            out.data_ptr<float>(), w.n};
    const bool simd = use_simd(w) && kernels::vnni_usable();
    at::parallel_for(0, w.n, kGrainRows, [&](int64_t n0, int64_t n1) {
        if (simd) kernels::gemv_s8_avx512vnni(w, a, n0, n1);
        else kernels::gemv_s8_ref(w, a, n0, n1);
    });
    return out;
}

at::Tensor dequantized(const kernels::WeightView &w, at::ScalarType dtype) {
    at::Tensor dst = at::empty({w.n, w.k}, dtype);
    const bool simd = use_simd(w) && (dtype == at::kFloat || kernels::bf16_usable());
    at::parallel_for(0, w.n, kGrainRows, [&](int64_t n0, int64_t n1) {
        if (dtype == at::kFloat) {
            if (simd) kernels::dequant_f32_avx512(w, dst.data_ptr<float>(), w.k, n0, n1);
            else kernels::dequant_f32_ref(w, dst.data_ptr<float>(), w.k, n0, n1);
        } else {
            auto *p = reinterpret_cast<uint16_t *>(dst.data_ptr<at::BFloat16>());
            if (simd) kernels::dequant_bf16_avx512(w, p, w.k, n0, n1);
            else kernels::dequant_bf16_ref(w, p, w.k, n0, n1);
        }
    });
    return dst;
}

}  // namespace

void set_force_portable_kernels(bool on) { g_force_portable = on; }

at::Tensor woq_linear(const at::Tensor &input, const at::Tensor &qweight, const at::Tensor &scales,
                      const at::Tensor &zeros, const c10::optional<at::Tensor> &bias,
                      const c10::optional<at::Tensor> &perm, int64_t bits, int64_t group_size, int64_t in_features,
                      c10::string_view lowp_mode) {
    const std::string mode(lowp_mode);
    TORCH_CHECK(mode == "fp32" || mode == "bf16" || mode == "int8", "ipex::woq_linear: lowp_mode must be fp32, bf16 or int8, got ",
                mode);
    TORCH_CHECK(bits == 4 || bits == 8, "ipex::woq_linear: bits must be 4 or 8, got ", bits);
    const int64_t k = in_features;
    TORCH_CHECK(k > 0 && group_size > 0 && k % group_size == 0, "ipex::woq_linear: group_size ", group_size,
                " must divide in_features ", k);
    TORCH_CHECK(at::isFloatingType(input.scalar_type()) && input.dim() >= 1 && input.size(-1) == k,
                "ipex::woq_linear: input must be a float tensor [..., ", k, "], got ", input.sizes());
    TORCH_CHECK(qweight.scalar_type() == at::kByte && qweight.dim() == 2 && qweight.is_contiguous() &&
                    qweight.size(1) == packed_row_bytes(k, static_cast<int>(bits)),
                "ipex::woq_linear: qweight must be contiguous uint8 [N, ", packed_row_bytes(k, static_cast<int>(bits)),
                "], got ", qweight.sizes());
    const int64_t n = qweight.size(0), groups = k / group_size;
    for (const at::Tensor *t : {&scales, &zeros})
        TORCH_CHECK(t->scalar_type() == at::kFloat && t->is_contiguous() && t->sizes() == at::IntArrayRef({n, groups}),
                    "ipex::woq_linear: scales and zeros must be contiguous float [", n, ", ", groups, "], got ",
                    t->sizes());
    if (bias && bias->defined())
        TORCH_CHECK(bias->dim() == 1 && bias->size(0) == n, "ipex::woq_linear: bias must have ", n, " elements");
    if (perm && perm->defined())
        TORCH_CHECK(perm->scalar_type() == at::kLong && perm->dim() == 1 && perm->size(0) == k,
                    "ipex::woq_linear: perm must be int64 [", k, "]");

    const kernels::WeightView w = view_of(qweight, scales, zeros, bits, group_size, k);
    at::Tensor x2d = input.reshape({-1, k});
    if (perm && perm->defined()) x2d = x2d.index_select(1, *perm);
    const int64_t m = x2d.size(0);
    at::Tensor out;
    if (m >= kMatmulRows) {
        const at::ScalarType dtype = mode == "fp32" ? at::kFloat : at::kBFloat16;
        out = at::matmul(x2d.to(dtype), dequantized(w, dtype).t()).to(at::kFloat);
    } else if (mode == "int8") {
        out = gemv_s8(w, x2d);
    } else {
        out = gemv_f32(w, x2d);
    }
    if (bias && bias->defined()) out.add_(bias->to(at::kFloat));
    std::vector<int64_t> shape = input.sizes().vec();
    shape.back() = n;
    return out.to(input.scalar_type()).reshape(shape);
}

}  // namespace ipex::woq

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("woq_linear(Tensor input, Tensor qweight, Tensor scales, Tensor zeros, Tensor? bias, Tensor? perm, "
          "int bits, int group_size, int in_features, str lowp_mode) -> Tensor");
}

TORCH_LIBRARY_IMPL(ipex, CPU, m) { m.impl("woq_linear", TORCH_FN(ipex::woq::woq_linear)); }
