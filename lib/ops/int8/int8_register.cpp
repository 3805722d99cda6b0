// The ipex int8 ops: ipex::int8_op(input, ctx) and ipex::int8_op_sum(input, other, ctx) on
// quint8 tensors, with the prepacked Int8Context class.
#include <torch/library.h>

#include "ops/int8/int8_context.h"
#include "ops/int8/int8_graph.h"
#include "ops/op_errors.h"

namespace {

using CtxPtr = c10::intrusive_ptr<ipex::quant::Int8Context>;

at::Tensor int8_op(const at::Tensor &input, const CtxPtr &ctx) {
    TORCH_CHECK(!ctx->params().sum, "ipex::int8_op: this context fuses an add; call ipex::int8_op_sum");
    return ctx->run(input, c10::nullopt);
}

at::Tensor int8_op_sum(const at::Tensor &input, const at::Tensor &other, const CtxPtr &ctx) {
    TORCH_CHECK(ctx->params().sum, "ipex::int8_op_sum: this context fuses no add; call ipex::int8_op");
    return ctx->run(input, other);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    using ipex::quant::Int8Context;
    m.class_<Int8Context>("Int8Context")
        .def("describe", &Int8Context::describe)
        .def_pickle([](const CtxPtr &self) { return self->state(); },
                    [](Int8Context::State state) { return Int8Context::from_state(std::move(state)); });
    m.def("int8_op(Tensor input, __torch__.torch.classes.ipex.Int8Context ctx) -> Tensor", IPEX_GUARDED(int8_op));
    m.def("int8_op_sum(Tensor input, Tensor other, __torch__.torch.classes.ipex.Int8Context ctx) -> Tensor",
          IPEX_GUARDED(int8_op_sum));
    m.def("int8_graph(Tensor input, __torch__.torch.classes.ipex.Int8Context[] contexts, int[] program) -> Tensor",
          IPEX_GUARDED(ipex::quant::int8_graph));
    m.def("int8_conv_max_pool(Tensor input, __torch__.torch.classes.ipex.Int8Context ctx, int[] kernel_size, "
          "int[] stride, int[] padding, int[] dilation, bool ceil_mode) -> Tensor",
          IPEX_GUARDED(ipex::quant::int8_conv_max_pool));
}
