#include "quant/int8_graph.h"

#include <ATen/native/Pool.h>

#include <sstream>

#include "ops/graph_program.h"
#include "ops/op_errors.h"

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

namespace {

constexpr const char *kConvMaxPool = "ipex::int8_conv_max_pool";

// One of max_pool2d's arguments as two values: one value stands for both, an empty stride is
// the kernel size.
std::vector<int64_t> pair_of(const char *name, at::IntArrayRef values, at::IntArrayRef empty_as) {
    if (values.empty() && !empty_as.empty()) return empty_as.vec();
    IPEX_CHECK_INPUT(values.size() == 1 || values.size() == 2, kConvMaxPool, ": ", name,
                     " must have 1 or 2 values, got ", values);
    return {values.front(), values.back()};
}

}  // namespace

std::vector<ipex::ops::GraphStep> int8_conv_max_pool_steps(const c10::intrusive_ptr<Int8Context> &ctx,
                                                           at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                           at::IntArrayRef padding, at::IntArrayRef dilation,
                                                           bool ceil_mode) {
    const std::vector<int64_t> k = pair_of("kernel_size", kernel_size, {});
    const std::vector<int64_t> s = pair_of("stride", stride, k), p = pair_of("padding", padding, {});
    const std::vector<int64_t> d = pair_of("dilation", dilation, {});
    for (int i = 0; i < 2; ++i)
        IPEX_CHECK_INPUT(k[i] > 0 && s[i] > 0 && d[i] > 0 && p[i] >= 0 && p[i] <= k[i] / 2, kConvMaxPool,
                         ": kernel_size ", at::IntArrayRef(k), ", stride ", at::IntArrayRef(s), ", padding ",
                         at::IntArrayRef(p), ", dilation ", at::IntArrayRef(d),
                         " (each above 0, padding at most half the kernel)");
    std::vector<ipex::ops::GraphStep> steps = int8_steps(Int8Chain({ctx}));
    ipex::ops::GraphStep pool;
    pool.output_sizes = [=](const std::vector<int64_t> &in) -> std::vector<int64_t> {
        if (in.size() != 4) return {};
        std::vector<int64_t> out{in[0], in[1]};
        for (int i = 0; i < 2; ++i) {
            const int64_t size = at::native::pooling_output_shape_pad_lr<int64_t>(in[i + 2], k[i], p[i], p[i], s[i],
                                                                                  d[i], ceil_mode);
            if (size < 1) return {};
            out.push_back(size);
        }
        return out;
    };
    pool.output_element_bytes = 1;
    pool.describe = [=] {
        std::ostringstream out;
        out << "max_pool2d k" << at::IntArrayRef(k) << " s" << at::IntArrayRef(s) << " p" << at::IntArrayRef(p)
            << " d" << at::IntArrayRef(d) << (ceil_mode ? " ceil" : "");
        return out.str();
    };
    pool.run = [=](const at::Tensor &src, const at::Tensor *, bool) {
        return at::max_pool2d(src, k, s, p, d, ceil_mode);
    };
    steps.push_back(std::move(pool));
    return steps;
}

at::Tensor int8_conv_max_pool(const at::Tensor &input, const c10::intrusive_ptr<Int8Context> &ctx,
                              at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                              at::IntArrayRef dilation, bool ceil_mode) {
    IPEX_CHECK_INPUT(!ctx->params().sum && ctx->params().kind == "conv2d", kConvMaxPool,
                     ": the context must be a 2-D convolution without a sum, got ", ctx->describe());
    const std::vector<ipex::ops::GraphStep> steps =
        int8_conv_max_pool_steps(ctx, kernel_size, stride, padding, dilation, ceil_mode);
    const int64_t program[] = {0, -1, 1, -1};
    return ipex::ops::run_graph_program(kConvMaxPool, input, steps, program);
}

}  // namespace ipex::quant
