#include "ops/conv_graph_op.h"

namespace ipex::ops {

std::vector<GraphStep> convolution_steps(const ConvChain &contexts) {
    std::vector<GraphStep> steps;
    for (size_t k = 0; k < contexts.size(); ++k) {
        c10::intrusive_ptr<ConvolutionContext> ctx = contexts.get(k);
        GraphStep step;
        step.output_sizes = [ctx](const std::vector<int64_t> &in) { return ctx->taken_output_sizes(in); };
        step.output_element_bytes = static_cast<int64_t>(at::elementSize(ctx->output_dtype()));
        step.has_sum = tensor_post_op(ctx->post_ops()) >= 0;
        step.describe = [ctx] { return ctx->describe(); };
        step.run = [ctx](const at::Tensor &src, const at::Tensor *summand, bool summand_dead) {
            return summand ? ctx->run(src, *summand, summand_dead) : ctx->run(src, c10::nullopt);
        };
        step.sums_in_place = ctx->sum_in_place();
        if (!step.has_sum)
            step.run_into = [ctx](const at::Tensor &src, const at::Tensor &out) {
                if (out.scalar_type() != ctx->output_dtype()) return at::Tensor();  // a later sum changed it
                ctx->run_into(src, out);
                return out;
            };
        steps.push_back(std::move(step));
    }
    return steps;
}

at::Tensor convolution_graph(const at::Tensor &input, const ConvChain &contexts, at::IntArrayRef program) {
    return run_graph_program("ipex::convolution_graph", input, convolution_steps(contexts), program);
}

}  // namespace ipex::ops
