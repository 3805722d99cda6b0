#include "ops/int8/int8_graph.h"

#include <sstream>

#include "ops/graph_program.h"
#include "ops/op_errors.h"
#include "ops/pool_op.h"
#include "ops/int8/int8_pool.h"
#include "ops/int8/int8_quantize.h"

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
        step.sums_in_place = ctx->params().sum_in_place;
        if (!ctx->params().sum && ctx->params().kind == "conv2d")
            step.run_into = [ctx](const at::Tensor &src, const at::Tensor &out) { return ctx->run_into(src, out); };
        steps.push_back(std::move(step));
    }
    return steps;
}

at::Tensor int8_graph(const at::Tensor &input, const Int8Chain &contexts, at::IntArrayRef program) {
    return ipex::ops::run_graph_program("ipex::int8_graph", input, int8_steps(contexts), program);
}

namespace {
constexpr const char *kConvMaxPool = "ipex::int8_conv_max_pool";

// The pooling's window; throws (caller input) for arguments aten's pooling would reject.
ipex::ops::PoolWindow checked_window(at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                     at::IntArrayRef dilation) {
    const auto window = ipex::ops::pool_window(kernel_size, stride, padding, dilation);
    IPEX_CHECK_INPUT(window, kConvMaxPool,
                     ": kernel_size must have 1 or 2 values, stride, padding and dilation too (stride may be empty), "
                     "each above 0, padding at most half the kernel; got kernel_size ", kernel_size, ", stride ",
                     stride, ", padding ", padding, ", dilation ", dilation);
    return *window;
}

}  // namespace

std::vector<ipex::ops::GraphStep> int8_conv_max_pool_steps(const c10::intrusive_ptr<Int8Context> &ctx,
                                                           at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                           at::IntArrayRef padding, at::IntArrayRef dilation,
                                                           bool ceil_mode) {
    const ipex::ops::PoolWindow window = checked_window(kernel_size, stride, padding, dilation);
    // aten's quantized pooling reads two values of each list: the window's.
    const std::vector<int64_t> k(window.kernel.begin(), window.kernel.end());
    const std::vector<int64_t> s(window.stride.begin(), window.stride.end());
    const std::vector<int64_t> p(window.padding.begin(), window.padding.end());
    const std::vector<int64_t> d(window.dilation.begin(), window.dilation.end());
    std::vector<ipex::ops::GraphStep> steps = int8_steps(Int8Chain({ctx}));
    ipex::ops::GraphStep pool;
    pool.output_sizes = [=](const std::vector<int64_t> &in) -> std::vector<int64_t> {
        if (in.size() != 4) return {};
        std::vector<int64_t> out{in[0], in[1]};
        for (int i = 0; i < 2; ++i) {
            out.push_back(ipex::ops::pooled_size(in[i + 2], k[i], s[i], p[i], d[i], ceil_mode));
            if (out.back() < 1) return {};
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
        return int8_max_pool2d(src, k, s, p, d, ceil_mode);
    };
    steps.push_back(std::move(pool));
    return steps;
}

at::Tensor int8_conv_max_pool(const at::Tensor &input, const c10::intrusive_ptr<Int8Context> &ctx,
                              at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                              at::IntArrayRef dilation, bool ceil_mode) {
    IPEX_CHECK_INPUT(!ctx->params().sum && ctx->params().kind == "conv2d", kConvMaxPool,
                     ": the context must be a 2-D convolution without a sum, got ", ctx->describe());
    const at::Tensor fused =
        ctx->run_max_pooled(input, checked_window(kernel_size, stride, padding, dilation), ceil_mode);
    if (fused.defined()) return fused;
    const Int8Params &p = ctx->params();
    const at::Tensor q =
        input.is_quantized() ? input : ipex::quant::quantize_per_tensor(input, p.in_scale, p.in_zero_point, p.in_dtype);
    const int64_t program[] = {0, -1, 1, -1};
    return ipex::ops::run_graph_program(
        kConvMaxPool, q, int8_conv_max_pool_steps(ctx, kernel_size, stride, padding, dilation, ceil_mode), program);
}

}  // namespace ipex::quant
