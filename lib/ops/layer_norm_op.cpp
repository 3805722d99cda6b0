#include "ops/layer_norm_op.h"

#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "base/isa.h"
#include "ops/op_errors.h"

namespace ipex::ops {
namespace layer_norm_kernel {

bool available(bool bf16) { return bf16 ? isa::avx512_bf16() : isa::avx512(); }

}  // namespace layer_norm_kernel

namespace {

bool broadcastable(at::IntArrayRef a, at::IntArrayRef b) {
    for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
        const int64_t x = a[a.size() - i], y = b[b.size() - i];
        if (x != y && x != 1 && y != 1) return false;
    }
    return true;
}

bool kernel_dtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16; }

// Checks the arguments aten::add and aten::layer_norm would reject, with the caller's words.
void check_arguments(const char *op, at::IntArrayRef sum_sizes, at::IntArrayRef normalized_shape,
                     const c10::optional<at::Tensor> &weight, const c10::optional<at::Tensor> &bias) {
    IPEX_CHECK_INPUT(!normalized_shape.empty(), op, ": normalized_shape is empty");
    const int64_t dims = static_cast<int64_t>(normalized_shape.size());
    const int64_t rank = static_cast<int64_t>(sum_sizes.size());
    IPEX_CHECK_INPUT(rank >= dims && sum_sizes.slice(rank - dims).equals(normalized_shape), op, ": normalized_shape ",
                     normalized_shape, " is not the trailing shape of the input ", sum_sizes);
    for (const auto *t : {&weight, &bias})
        if (*t && (*t)->defined())
            IPEX_CHECK_INPUT((*t)->sizes().equals(normalized_shape) && (*t)->is_floating_point(), op,
                             ": weight and bias must be floating tensors of shape normalized_shape ",
                             normalized_shape, " (got ", (*t)->sizes(), ")");
}

at::Tensor fp32_param(const c10::optional<at::Tensor> &t) {
    if (!t || !t->defined()) return {};
    return t->to(at::kFloat).contiguous();
}

c10::optional<at::Tensor> as(const c10::optional<at::Tensor> &t, at::ScalarType dtype) {
    if (!t || !t->defined()) return c10::nullopt;
    return t->to(dtype);
}

// Returns (sum or undefined, out); runs the fused kernel where it applies.
std::tuple<at::Tensor, at::Tensor> run(const char *op, const at::Tensor &input, const c10::optional<at::Tensor> &other,
                                       double alpha, at::IntArrayRef normalized_shape,
                                       const c10::optional<at::Tensor> &weight, const c10::optional<at::Tensor> &bias,
                                       double eps, bool want_sum) {
    const bool add = other && other->defined();
    IPEX_CHECK_INPUT(input.is_floating_point() && (!add || other->is_floating_point()), op,
                     ": input and other must be floating tensors (got ", input.scalar_type(),
                     add ? std::string(", ") + c10::toString(other->scalar_type()) : std::string(), ")");
    IPEX_CHECK_INPUT(!add || broadcastable(input.sizes(), other->sizes()),
                     op, ": other of shape ", add ? other->sizes() : input.sizes(),
                     " does not broadcast with the input's shape ", input.sizes());
    const std::vector<int64_t> sum_sizes =
        add ? at::infer_size(input.sizes(), other->sizes()) : input.sizes().vec();
    check_arguments(op, sum_sizes, normalized_shape, weight, bias);
    const at::ScalarType out_type = add ? at::result_type(input, *other) : input.scalar_type();
    const bool same_shape = !add || other->sizes().equals(input.sizes());
    const bool fused = same_shape && kernel_dtype(input.scalar_type()) && kernel_dtype(out_type) &&
                       (!add || kernel_dtype(other->scalar_type())) &&
                       layer_norm_kernel::available(input.scalar_type() == at::kBFloat16 || out_type == at::kBFloat16 ||
                                                    (add && other->scalar_type() == at::kBFloat16));
    if (!fused) {
        auto [s, out] = add_layer_norm_reference(input, other, alpha, normalized_shape, weight, bias, eps);
        return {want_sum ? s : at::Tensor(), out};
    }
    const at::Tensor x = input.contiguous();
    const at::Tensor y = add ? other->contiguous() : at::Tensor();
    const at::Tensor w = fp32_param(weight), b = fp32_param(bias);
    const at::Tensor out = at::empty(input.sizes(), input.options().dtype(out_type));
    const at::Tensor sum = want_sum ? at::empty_like(out) : at::Tensor();
    layer_norm_kernel::Problem p;
    p.bf16_in = x.scalar_type() == at::kBFloat16;
    p.bf16_other = add && y.scalar_type() == at::kBFloat16;
    p.bf16_out = out_type == at::kBFloat16;
    p.input = x.data_ptr();
    p.other = add ? y.data_ptr() : nullptr;
    p.alpha = static_cast<float>(alpha);
    p.weight = w.defined() ? w.data_ptr<float>() : nullptr;
    p.bias = b.defined() ? b.data_ptr<float>() : nullptr;
    p.eps = static_cast<float>(eps);
    p.cols = c10::multiply_integers(normalized_shape);
    p.rows = p.cols ? input.numel() / p.cols : 0;
    p.sum = want_sum ? sum.data_ptr() : nullptr;
    p.out = out.data_ptr();
    if (p.rows && p.cols) layer_norm_kernel::run(p);
    return {sum, out};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> add_layer_norm_reference(const at::Tensor &input,
                                                            const c10::optional<at::Tensor> &other, double alpha,
                                                            at::IntArrayRef normalized_shape,
                                                            const c10::optional<at::Tensor> &weight,
                                                            const c10::optional<at::Tensor> &bias, double eps) {
    const at::Tensor s = other && other->defined() ? at::add(input, *other, alpha) : input;
    // fp32 and fp64 normalize in their own dtype; narrower ones in fp32, rounded back.
    const at::ScalarType compute = s.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    const at::Tensor out = at::layer_norm(s.to(compute), normalized_shape, as(weight, compute), as(bias, compute), eps)
                               .to(s.scalar_type());
    return {s, out};
}

at::Tensor layer_norm(const at::Tensor &input, const c10::optional<at::Tensor> &other, double alpha,
                      at::IntArrayRef normalized_shape, const c10::optional<at::Tensor> &weight,
                      const c10::optional<at::Tensor> &bias, double eps) {
    return std::get<1>(run("ipex::layer_norm", input, other, alpha, normalized_shape, weight, bias, eps, false));
}

std::tuple<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor &input, const at::Tensor &other, double alpha,
                                                  at::IntArrayRef normalized_shape,
                                                  const c10::optional<at::Tensor> &weight,
                                                  const c10::optional<at::Tensor> &bias, double eps) {
    return run("ipex::add_layer_norm", input, other, alpha, normalized_shape, weight, bias, eps, true);
}

}  // namespace ipex::ops

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("layer_norm(Tensor input, Tensor? other, float alpha, int[] normalized_shape, Tensor? weight, "
          "Tensor? bias, float eps) -> Tensor",
          IPEX_GUARDED(ipex::ops::layer_norm));
    m.def("add_layer_norm(Tensor input, Tensor other, float alpha, int[] normalized_shape, Tensor? weight, "
          "Tensor? bias, float eps) -> (Tensor, Tensor)",
          IPEX_GUARDED(ipex::ops::add_layer_norm));
}
