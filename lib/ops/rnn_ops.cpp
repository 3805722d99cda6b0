// The ipex recurrent ops on a prepacked RnnContext, with aten::lstm / aten::gru's outputs:
//   ipex::lstm(Tensor input, Tensor[] hx, RnnContext ctx) -> (output, h_n, c_n)
//       (hx is [h0, c0] or empty for zero states)
//   ipex::gru(Tensor input, Tensor? hx, RnnContext ctx) -> (output, h_n)
//   ipex::rnn_prepack(...) builds a context (for scripts).
#include <torch/library.h>

#include "ops/op_errors.h"
#include "ops/rnn_context.h"

namespace ipex::ops {
namespace {

using RnnPtr = c10::intrusive_ptr<RnnContext>;

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm(const at::Tensor &input, const std::vector<at::Tensor> &hx,
                                                    const RnnPtr &ctx) {
    TORCH_CHECK(ctx->is_lstm(), "ipex::lstm: the context holds a ", ctx->params().mode, "; call ipex::gru");
    IPEX_CHECK_INPUT(hx.empty() || hx.size() == 2, "ipex::lstm: hx must be [h0, c0] or empty, got ", hx.size(),
                     " tensors");
    return ctx->run(input, hx.empty() ? at::Tensor() : hx[0], hx.empty() ? at::Tensor() : hx[1]);
}

std::tuple<at::Tensor, at::Tensor> gru(const at::Tensor &input, const c10::optional<at::Tensor> &hx,
                                       const RnnPtr &ctx) {
    TORCH_CHECK(!ctx->is_lstm(), "ipex::gru: the context holds an lstm; call ipex::lstm");
    auto [output, h_n, unused] = ctx->run(input, hx.value_or(at::Tensor()), at::Tensor());
    return {output, h_n};
}

RnnPtr rnn_prepack(std::string mode, std::vector<at::Tensor> weights, int64_t input_size, int64_t hidden_size,
                   int64_t num_layers, bool has_biases, bool bidirectional, bool batch_first, std::string dtype) {
    RnnParams params{std::move(mode), input_size, hidden_size, num_layers, bidirectional, batch_first, has_biases};
    return c10::make_intrusive<RnnContext>(std::move(params), std::move(weights), std::move(dtype));
}

}  // namespace
}  // namespace ipex::ops

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    using namespace ipex::ops;
    m.class_<RnnContext>("RnnContext")
        .def("describe", &RnnContext::describe)
        .def_pickle([](const RnnPtr &self) { return self->state(); },
                    [](RnnContext::State state) { return RnnContext::from_state(std::move(state)); });
    m.def("lstm(Tensor input, Tensor[] hx, __torch__.torch.classes.ipex.RnnContext ctx) -> (Tensor, Tensor, Tensor)",
          IPEX_GUARDED(lstm));
    m.def("gru(Tensor input, Tensor? hx, __torch__.torch.classes.ipex.RnnContext ctx) -> (Tensor, Tensor)",
          IPEX_GUARDED(gru));
    m.def("rnn_prepack(str mode, Tensor[] weights, int input_size, int hidden_size, int num_layers, bool has_biases, "
          "bool bidirectional, bool batch_first, str dtype) -> __torch__.torch.classes.ipex.RnnContext",
          IPEX_GUARDED(rnn_prepack));
}
