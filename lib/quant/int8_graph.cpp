#include "quant/int8_graph.h"

#include "ops/graph_program.h"

namespace ipex::quant {

std::vector<ipex::ops::GraphStep> int8_steps(const Int8Chain &contexts) {
    std::vector<ipex::ops::GraphStep> steps;
    for (size_t k = 0; k < contexts.size(); ++k) {
        c10::intrusive_ptr<Int8Context> ctx = contexts.get(k);
        ipex::ops::GraphStep step;
        step.output_sizes = [ctx](const std::vector<int64_t> &in) { return ctx->output_sizes(in); };
        step.output_element_bytes = 1;
        step.has_sum = ctx->params().sum;
        step.describe = [ctx] { return ctx->describe(); };
        step.run = [ctx](const at::Tensor &src, const at::Tensor *summand, bool summand_dead) {
            if (!summand) return ctx->run(src, c10::nullopt);
            if (ctx->params().sum_in_place && !summand_dead) return ctx->run(src, summand->clone());
            return ctx->run(src, *summand);
        };
        steps.push_back(std::move(step));
    }
    return steps;
}

at::Tensor int8_graph(const at::Tensor &input, const Int8Chain &contexts, at::IntArrayRef program) {
    return ipex::ops::run_graph_program("ipex::int8_graph", input, int8_steps(contexts), program);
}

}  // namespace ipex::quant
