// The checks and helpers every fused step shares (step_args.h).
#include "train/step_args.h"

#include "ops/op_errors.h"

namespace ipex::train {

void check_same_shape(const char *op, const at::Tensor &param, const at::Tensor &other, const char *name) {
    IPEX_CHECK_INPUT(other.sizes() == param.sizes(), op, ": ", name, " has shape ", other.sizes(),
                     " but the parameter has ", param.sizes());
    IPEX_CHECK_INPUT(other.is_contiguous(), op, ": ", name, " must be contiguous (call .contiguous() on it)");
    IPEX_CHECK_INPUT(other.device().is_cpu(), op, ": ", name, " must be a CPU tensor, not on ", other.device());
}

float *state_of(const char *op, const at::Tensor &param, const at::Tensor &state, const char *name) {
    IPEX_CHECK_INPUT(state.defined(), op, ": ", name, " is required here");
    IPEX_CHECK_INPUT(state.scalar_type() == at::kFloat, op, ": ", name, " must be float32 (fp32 optimizer state), not ",
                     state.scalar_type());
    check_same_shape(op, param, state, name);
    return state.data_ptr<float>();
}

StepBuffers master_of(const char *op, const at::Tensor &param, const c10::optional<at::Tensor> &trail) {
    IPEX_CHECK_INPUT(param.defined(), op, ": the parameter is undefined");
    IPEX_CHECK_INPUT(param.device().is_cpu(), op, ": the parameter must be a CPU tensor, not on ", param.device());
    IPEX_CHECK_INPUT(param.is_contiguous(), op, ": the parameter must be contiguous");
    const bool has_trail = trail.has_value() && trail->defined();
    StepBuffers io;
    if (param.scalar_type() == at::kFloat) {
        IPEX_CHECK_INPUT(!has_trail, op, ": a trail goes with a bf16 parameter (the top 16 bits of its master), "
                                         "but the parameter is float32");
        io.master = param.data_ptr<float>();
    } else {
        IPEX_CHECK_INPUT(param.scalar_type() == at::kBFloat16, op, ": the parameter must be float32, or bfloat16 with "
                         "its int16 trail (split master weight), not ", param.scalar_type());
        IPEX_CHECK_INPUT(has_trail, op, ": a bfloat16 parameter needs its trail (int16, the low 16 bits of the fp32 "
                                        "master weight)");
        IPEX_CHECK_INPUT(trail->scalar_type() == at::kShort, op, ": the trail must be int16, not ",
                         trail->scalar_type());
        check_same_shape(op, param, *trail, "the trail");
        io.top = reinterpret_cast<uint16_t *>(param.data_ptr<at::BFloat16>());
        io.trail = reinterpret_cast<uint16_t *>(trail->data_ptr<int16_t>());
    }
    return io;
}

StepBuffers buffers_of(const char *op, const at::Tensor &param, const at::Tensor &grad,
                       const c10::optional<at::Tensor> &trail) {
    StepBuffers io = master_of(op, param, trail);
    IPEX_CHECK_INPUT(grad.defined(), op, ": the gradient is undefined");
    IPEX_CHECK_INPUT(!grad.is_sparse(), op, ": the gradient is sparse; this step takes a dense gradient "
                     "(sparse ones: ipex::sparse_sgd_step, ipex::sparse_adagrad_step)");
    check_same_shape(op, param, grad, "the gradient");
    if (grad.scalar_type() == at::kFloat) {
        io.grad = grad.data_ptr<float>();
    } else {
        IPEX_CHECK_INPUT(grad.scalar_type() == at::kBFloat16, op, ": the gradient must be float32 or bfloat16, not ",
                         grad.scalar_type());
        io.grad_bf16 = grad.data_ptr<at::BFloat16>();
    }
    return io;
}

void bump_versions(std::initializer_list<const at::Tensor *> written) {
    for (const at::Tensor *tensor : written) {
        if (tensor && tensor->defined() && !tensor->is_inference()) tensor->unsafeGetTensorImpl()->bump_version();
    }
}

void bump_versions(const at::Tensor &param, const c10::optional<at::Tensor> &trail,
                   std::initializer_list<const at::Tensor *> state) {
    bump_versions({&param, trail.has_value() ? &*trail : nullptr});
    bump_versions(state);
}

}  // namespace ipex::train
