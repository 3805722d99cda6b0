// ipex::convolution_graph (ops/conv_graph_op.h): residual blocks of convolutions run a few images
// at a time give the outputs of the same contexts run one after the other, for every budget,
// fp32 and bf16, within a stage and across a stride-2 block whose pieces take other part sizes;
// the parts each piece runs in (seen from the shapes its convolutions are asked for); the
// caller's input is never written; NCHW, unbatched and bf16 inputs; the checks of the program.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/conv_graph_op.h"
#include "ops/ops.h"
#include "ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using testing::ScopedEnv;
using Ctx = c10::intrusive_ptr<ConvolutionContext>;

Ctx conv(int64_t in, int64_t out, int64_t k, int64_t stride, const std::string &dtype, PostOps post_ops) {
    ConvParams p{{stride, stride}, {k / 2, k / 2}, {1, 1}, {0, 0}, 1, false};
    at::Tensor w = at::randn({out, in, k, k}) / std::sqrt(static_cast<double>(in * k * k));
    return c10::make_intrusive<ConvolutionContext>(dtype == "bf16" ? w.to(at::kBFloat16) : w, at::randn({out}) * 0.1,
                                                   p, dtype, std::move(post_ops), true, std::vector<int64_t>{});
}

// Contexts and program of ResNet bottlenecks: the first with a downsample convolution (stride
// `stride`) of the block input as its summand (unless `downsample` is false: in == 4 mid), the
// others adding their input.
struct Graph {
    std::vector<Ctx> contexts;
    std::vector<int64_t> program;
};

void add_blocks(Graph &g, int blocks, int64_t in, int64_t mid, int64_t stride, const std::string &dtype,
                bool downsample = true) {
    const PostOps relu{{"relu"}}, sum_relu{{"sum", 1.0}, {"relu"}};
    for (int b = 0; b < blocks; ++b) {
        const int64_t x = static_cast<int64_t>(g.contexts.size());  // the block's input value
        const int64_t c_in = b == 0 ? in : 4 * mid, s = b == 0 ? stride : 1;
        int64_t summand = x;
        if (b == 0 && downsample) {
            g.contexts.push_back(conv(c_in, 4 * mid, 1, s, dtype, {}));
            g.program.insert(g.program.end(), {x, -1});
            summand = static_cast<int64_t>(g.contexts.size());
        }
        g.contexts.push_back(conv(c_in, mid, 1, 1, dtype, relu));
        g.program.insert(g.program.end(), {x, -1});
        g.contexts.push_back(conv(mid, mid, 3, s, dtype, relu));
        g.program.insert(g.program.end(), {static_cast<int64_t>(g.contexts.size()) - 1, -1});
        g.contexts.push_back(conv(mid, 4 * mid, 1, 1, dtype, sum_relu));
        g.program.insert(g.program.end(), {static_cast<int64_t>(g.contexts.size()) - 1, summand});
    }
}

ConvChain list_of(const std::vector<Ctx> &contexts) {
    ConvChain list;
    for (const auto &c : contexts) list.push_back(c);
    return list;
}

// The program's steps one after the other on the whole batch, summands never written.
at::Tensor in_sequence(const at::Tensor &x, const Graph &g) {
    std::vector<at::Tensor> values{x};
    for (size_t k = 0; k < g.contexts.size(); ++k) {
        const at::Tensor &src = values[g.program[2 * k]];
        const int64_t sum = g.program[2 * k + 1];
        values.push_back(sum >= 0 ? g.contexts[k]->run(src, values[sum], false)
                                  : g.contexts[k]->run(src, c10::nullopt));
    }
    return values.back();
}

at::Tensor graph_op(const at::Tensor &x, const Graph &g) {
    return convolution_graph(x, list_of(g.contexts), g.program);
}

// Two blocks at 28x28 (784 pixels an image: one image a part under a small budget), then two
// from a stride-2 block at 14x14 (196 pixels: four images a part at least).
Graph two_stages(const std::string &dtype) {
    Graph g;
    add_blocks(g, 2, 8, 4, 1, dtype);
    add_blocks(g, 2, 16, 8, 2, dtype);
    return g;
}

TEST(ConvGraph, EveryBudgetMatchesTheSequence) {
    at::manual_seed(0);
    for (const std::string dtype : {"fp32", "bf16"}) {
        if (!ipex::testing::onednn_runs(dtype)) continue;
        const Graph g = two_stages(dtype);
        check_graph_program("test", convolution_steps(list_of(g.contexts)), g.program);
        const at::Tensor x = at::randn({6, 8, 28, 28}).contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor before = x.clone();
        const at::Tensor want = in_sequence(x, g);
        for (const char *budget : {"1", "100000", "0", "100000000"}) {
            ScopedEnv env("IPEX_CONV_CHAIN_BYTES", budget);
            const at::Tensor got = graph_op(x, g);
            ASSERT_EQ(got.sizes(), want.sizes()) << dtype << " budget " << budget;
            EXPECT_EQ(got.scalar_type(), want.scalar_type());
            EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
            EXPECT_LE(testing::max_relative_error(got, want), dtype == "bf16" ? 2e-2 : 1e-5)
                << dtype << " budget " << budget;
            EXPECT_TRUE(at::equal(x, before)) << "the caller's input was written";
        }
    }
}

// The shapes the first convolution of each stage is asked for: under a 1-byte budget the 28x28
// stage one image at a time, the 14x14 one four (then the last two); the whole batch without a
// budget. Seen through the kernel choice of 1x1 convolutions (an own kernel beside oneDNN's).
TEST(ConvGraph, EachPieceTakesItsOwnPartSize) {
    if (!own_kernels::available(false)) GTEST_SKIP() << "no AVX-512: the 1x1 convolutions have no kernel choice to log";
    at::manual_seed(1);
    const Graph g = two_stages("fp32");
    const Ctx &first = g.contexts[1], &second_stage = g.contexts[8];  // each stage's first conv1
    ASSERT_TRUE(first->has_kernel_choice() && second_stage->has_kernel_choice());
    KernelShapeLog log;
    {
        ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "1");
        graph_op(at::randn({6, 8, 28, 28}), g);
    }
    {
        ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "0");
        graph_op(at::randn({3, 8, 28, 28}), g);
    }
    EXPECT_EQ(log.shapes_of(first.get()), (std::vector<std::vector<int64_t>>{{1, 8, 28, 28}, {3, 8, 28, 28}}));
    EXPECT_EQ(log.shapes_of(second_stage.get()),
              (std::vector<std::vector<int64_t>>{{4, 16, 28, 28}, {2, 16, 28, 28}, {3, 16, 28, 28}}));
}

// Blocks that add their input (the op's input is the first summand, never written over), on
// channels-last, NCHW, unbatched and bf16 inputs, with and without a budget; the registered op;
// the contexts' own errors.
TEST(ConvGraph, OtherInputs) {
    at::manual_seed(2);
    Graph g;
    add_blocks(g, 2, 16, 4, 1, "fp32", false);
    for (const char *budget : {"1", "0"}) {
        ScopedEnv env("IPEX_CONV_CHAIN_BYTES", budget);
        for (const at::Tensor &x : {at::randn({3, 16, 28, 28}).contiguous(at::MemoryFormat::ChannelsLast),
                                    at::randn({3, 16, 28, 28}), at::randn({16, 28, 28}),
                                    at::randn({2, 16, 28, 28}).to(at::kBFloat16)}) {
            const at::Tensor before = x.clone();
            const at::Tensor want = in_sequence(x, g);
            const at::Tensor got = graph_op(x, g);
            ASSERT_EQ(got.sizes(), want.sizes()) << x.sizes();
            EXPECT_LE(testing::max_relative_error(got, want), 1e-5) << x.sizes() << " budget " << budget;
            EXPECT_TRUE(at::equal(x, before)) << "the caller's input was written: " << x.sizes();
        }
    }
    ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "1");
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(kConvolutionGraph, "");
    const at::Tensor x = at::randn({2, 16, 28, 28});
    std::vector<c10::IValue> stack{x, c10::IValue(list_of(g.contexts)), c10::IValue(g.program)};
    op.callBoxed(&stack);
    ASSERT_EQ(stack.size(), 1u);
    EXPECT_LE(testing::max_relative_error(stack[0].toTensor(), in_sequence(x, g)), 1e-5);
    // The contexts' own errors: channels they do not take, an input too small.
    EXPECT_THROW(graph_op(at::randn({2, 6, 28, 28}), g), c10::Error);
    EXPECT_THROW(graph_op(at::ones({2, 16, 28, 28}, at::kLong), g), c10::Error);
}

TEST(ConvGraph, ProgramsThatDoNotFitAreErrors) {
    at::manual_seed(3);
    Graph g;
    add_blocks(g, 1, 8, 4, 1, "fp32");  // downsample, conv1, conv2, conv3 + downsample
    const ConvChain contexts = list_of(g.contexts);
    const at::Tensor x = at::randn({1, 8, 9, 9});
    const auto error_of = [&](std::vector<int64_t> program) {
        try {
            convolution_graph(x, contexts, program);
        } catch (const c10::Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(error_of({0, -1, 0, -1, 2}).find("holds 5 values for 4 convolutions"), std::string::npos);
    EXPECT_NE(error_of({0, -1, 0, -1, 3, -1, 3, 1}).find("convolution 2 reads value 3"), std::string::npos);
    EXPECT_NE(error_of({0, -1, 0, -1, 2, -1, 3, 5}).find("only values 0 to 3"), std::string::npos);
    EXPECT_NE(error_of({0, -1, 0, -1, 2, -1, 3, -1}).find("has a sum post-op and no summand"), std::string::npos);
    EXPECT_NE(error_of({0, -1, 0, 0, 2, -1, 3, 1}).find("has no sum post-op but a summand"), std::string::npos);
    EXPECT_NE(error_of({-1, -1, 0, -1, 2, -1, 3, 1}).find("reads value -1"), std::string::npos);
    EXPECT_EQ(error_of(g.program), std::string()) << "the program that fits";
    EXPECT_THROW(convolution_graph(x, ConvChain(), {}), c10::Error);
}

}  // namespace
}  // namespace ipex::ops
