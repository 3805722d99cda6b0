// The `ipex` TorchScript namespace: the prepacked context classes and the ops that run them.
// Other folders add their ops with TORCH_LIBRARY_FRAGMENT(ipex, m); this is the one
// TORCH_LIBRARY(ipex, m).
#include <torch/library.h>

#include <map>
#include <mutex>
#include <string>

#include "ops/conv_chain_op.h"
#include "ops/conv_graph_op.h"
#include "ops/ops.h"
#include "ops/op_errors.h"

namespace ipex::ops {
namespace {

using ConvPtr = c10::intrusive_ptr<ConvolutionContext>;
using LinearPtr = c10::intrusive_ptr<LinearContext>;

at::Tensor convolution(const at::Tensor &input, const ConvPtr &ctx) {
    TORCH_CHECK(tensor_post_op(ctx->post_ops()) < 0, "ipex::convolution: this context needs a second tensor; "
                "call ipex::convolution_sum");
    return ctx->run(input, c10::nullopt);
}

at::Tensor convolution_sum(const at::Tensor &input, const at::Tensor &other, const ConvPtr &ctx) {
    return ctx->run(input, other, /*may_write_other=*/false);
}

// Writes the result into `other` when the context allows it and dtype, shape and layout match;
// otherwise returns a new tensor (the schema's alias annotation is then merely conservative).
at::Tensor convolution_sum_(const at::Tensor &input, const at::Tensor &other, const ConvPtr &ctx) {
    return ctx->run(input, other, /*may_write_other=*/true);
}

at::Tensor linear(const at::Tensor &input, const LinearPtr &ctx) {
    TORCH_CHECK(tensor_post_op(ctx->post_ops()) < 0, "ipex::linear: this context needs a second tensor; "
                "call ipex::linear_binary");
    return ctx->run(input, c10::nullopt);
}

at::Tensor linear_binary(const at::Tensor &input, const at::Tensor &other, const LinearPtr &ctx) {
    return ctx->run(input, other);
}

ConvPtr convolution_prepack(const at::Tensor &weight, const c10::optional<at::Tensor> &bias,
                            std::vector<int64_t> stride, std::vector<int64_t> padding,
                            std::vector<int64_t> dilation, std::vector<int64_t> output_padding, int64_t groups,
                            bool transposed, std::string dtype, std::vector<std::string> post_ops,
                            std::vector<double> post_op_params, std::vector<int64_t> input_hint) {
    ConvParams p{std::move(stride), std::move(padding), std::move(dilation), std::move(output_padding), groups,
                 transposed};
    const PostOps ops = from_pickled(post_ops, post_op_params);
    bool in_place = false;
    return c10::make_intrusive<ConvolutionContext>(weight, bias, std::move(p), std::move(dtype), ops, in_place,
                                                   std::move(input_hint));
}

LinearPtr linear_prepack(const at::Tensor &weight, const c10::optional<at::Tensor> &bias, std::string dtype,
                         std::vector<std::string> post_ops, std::vector<double> post_op_params, int64_t rows_hint) {
    return c10::make_intrusive<LinearContext>(weight, bias, std::move(dtype), from_pickled(post_ops, post_op_params),
                                              rows_hint);
}

}  // namespace

bool dtype_supported(const std::string &dtype, std::string *why) {
    // The answer is the CPU's and the oneDNN build's, so each dtype is asked once per process.
    static std::mutex mutex;
    static std::map<std::string, std::string> refused;  // dtype -> why ("" when supported)
    std::lock_guard<std::mutex> lock(mutex);
    auto found = refused.find(dtype);
    if (found == refused.end()) {
        std::string reason;
        try {
            const at::ScalarType type = compute_scalar_type(dtype);
            ConvolutionContext conv(at::ones({8, 8, 3, 3}, type), c10::nullopt,
                                    ConvParams{{1, 1}, {1, 1}, {1, 1}, {}, 1, false}, dtype, {}, false, {1, 8, 8, 8});
            LinearContext lin(at::ones({8, 8}, type), c10::nullopt, dtype, {}, 4);
        } catch (const c10::Error &e) {
            reason = e.what_without_backtrace();
            if (reason.empty()) reason = "oneDNN refused " + dtype;
        }
        found = refused.emplace(dtype, std::move(reason)).first;
    }
    if (found->second.empty()) return true;
    if (why) *why = found->second;
    return false;
}

}  // namespace ipex::ops

TORCH_LIBRARY(ipex, m) {
    using namespace ipex::ops;
    m.class_<ConvolutionContext>("ConvolutionContext")
        .def("describe", &ConvolutionContext::describe)
        .def("packed_layouts", [](const ConvPtr &self) { return static_cast<int64_t>(self->packed_layouts()); })
        .def("cached_shapes", [](const ConvPtr &self) { return static_cast<int64_t>(self->cached_shapes()); })
        // The recorded kernel choices, one [own (0 or 1), input sizes...] per shape.
        .def("kernel_choices", [](const ConvPtr &self) { return std::get<14>(self->state()); })
        // Saved models hold version 1 or 2 of the state, so __setstate__ takes any tuple.
        .def_pickle([](const ConvPtr &self) { return self->state(); },
                    [](c10::IValue state) { return ConvolutionContext::from_saved(state); });
    m.class_<LinearContext>("LinearContext")
        .def("describe", &LinearContext::describe)
        // What the runtime layer holds for this op: packed weight copies, cached primitives.
        .def("packed_layouts", [](const LinearPtr &self) { return static_cast<int64_t>(self->packed_layouts()); })
        .def("cached_shapes", [](const LinearPtr &self) { return static_cast<int64_t>(self->cached_shapes()); })
        .def_pickle([](const LinearPtr &self) { return self->state(); },
                    [](LinearContext::State state) { return LinearContext::from_state(std::move(state)); });

    m.def("convolution(Tensor input, __torch__.torch.classes.ipex.ConvolutionContext ctx) -> Tensor", IPEX_GUARDED(convolution));
    m.def("convolution_sum(Tensor input, Tensor other, __torch__.torch.classes.ipex.ConvolutionContext ctx) -> Tensor",
          IPEX_GUARDED(convolution_sum));
    m.def("convolution_sum_(Tensor input, Tensor(a!) other, __torch__.torch.classes.ipex.ConvolutionContext ctx) "
          "-> Tensor(a!)",
          IPEX_GUARDED(convolution_sum_));
    // After the class: the schema names it (ops/conv_chain_op.h).
    m.def("convolution_chain(Tensor input, __torch__.torch.classes.ipex.ConvolutionContext[] contexts) -> Tensor",
          IPEX_GUARDED(convolution_chain));
    m.def("convolution_max_pool(Tensor input, __torch__.torch.classes.ipex.ConvolutionContext[] contexts, "
          "int[] kernel_size, int[] stride, int[] padding, int[] dilation, bool ceil_mode) -> Tensor",
          IPEX_GUARDED(convolution_max_pool));
    m.def("convolution_graph(Tensor input, __torch__.torch.classes.ipex.ConvolutionContext[] contexts, "
          "int[] program) -> Tensor",
          IPEX_GUARDED(convolution_graph));
    m.def("linear(Tensor input, __torch__.torch.classes.ipex.LinearContext ctx) -> Tensor", IPEX_GUARDED(linear));
    m.def("linear_binary(Tensor input, Tensor other, __torch__.torch.classes.ipex.LinearContext ctx) -> Tensor",
          IPEX_GUARDED(linear_binary));
    m.def("convolution_prepack(Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
          "int[] output_padding, int groups, bool transposed, str dtype, str[] post_ops, float[] post_op_params, "
          "int[] input_hint) -> __torch__.torch.classes.ipex.ConvolutionContext",
          IPEX_GUARDED(convolution_prepack));
    m.def("linear_prepack(Tensor weight, Tensor? bias, str dtype, str[] post_ops, float[] post_op_params, "
          "int rows_hint) -> __torch__.torch.classes.ipex.LinearContext",
          IPEX_GUARDED(linear_prepack));
}
