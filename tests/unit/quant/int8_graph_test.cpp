// ipex::int8_graph (quant/int8_graph.h): int8 residual blocks run a few images at a time give
// the bits of the same contexts run one after the other on the whole batch (integer sums,
// requantized per value), under every budget; contexts that sum in place never write over the
// op's input or a value read later; the registered op; a program that does not fit.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "quant/int8_context.h"
#include "quant/int8_graph.h"

namespace ipex::quant {
namespace {

using Ctx = c10::intrusive_ptr<Int8Context>;

constexpr double kScale = 0.05;
constexpr int64_t kZeroPoint = 3;

// A u8 -> u8 convolution with every activation at kScale / kZeroPoint; `sum`: adds a summand
// of the same parameters (in place: over it), then a ReLU.
Ctx conv(int64_t in, int64_t out, int64_t k, bool relu, bool sum) {
    Int8Params p;
    p.kind = "conv2d";
    p.stride = {1, 1};
    p.padding = {k / 2, k / 2};
    p.dilation = {1, 1};
    p.in_scale = p.out_scale = p.other_scale = kScale;
    p.in_zero_point = p.out_zero_point = p.other_zero_point = kZeroPoint;
    p.relu = relu;
    p.sum = p.sum_relu = p.sum_in_place = sum;
    const at::Tensor w = at::randn({out, in, k, k}) / std::sqrt(static_cast<double>(in * k * k));
    std::vector<double> scales(out, w.abs().max().item<double>() / 127.0);
    return c10::make_intrusive<Int8Context>(w, at::randn({out}) * 0.1, scales, p);
}

struct Graph {
    std::vector<Ctx> contexts;
    std::vector<int64_t> program;
};

// Bottlenecks that add their input (16 channels): the first block's summand is the op's input.
Graph blocks(int count) {
    Graph g;
    for (int b = 0; b < count; ++b) {
        const int64_t x = static_cast<int64_t>(g.contexts.size());
        g.contexts.push_back(conv(16, 4, 1, true, false));
        g.contexts.push_back(conv(4, 4, 3, true, false));
        g.contexts.push_back(conv(4, 16, 1, false, true));
        g.program.insert(g.program.end(), {x, -1, x + 1, -1, x + 2, x});
    }
    return g;
}

Int8Chain list_of(const std::vector<Ctx> &contexts) {
    Int8Chain list;
    for (const auto &c : contexts) list.push_back(c);
    return list;
}

at::Tensor in_sequence(const at::Tensor &x, const Graph &g) {
    std::vector<at::Tensor> values{x};
    for (size_t k = 0; k < g.contexts.size(); ++k) {
        const int64_t sum = g.program[2 * k + 1];
        const c10::optional<at::Tensor> other =
            sum >= 0 ? c10::optional<at::Tensor>(values[sum].clone()) : c10::nullopt;
        values.push_back(g.contexts[k]->run(values[g.program[2 * k]], other));
    }
    return values.back();
}

class ScopedBudget {
public:
    explicit ScopedBudget(const char *value) { setenv("IPEX_CONV_CHAIN_BYTES", value, 1); }
    ~ScopedBudget() { unsetenv("IPEX_CONV_CHAIN_BYTES"); }
};

at::Tensor input(int64_t n) {
    return at::quantize_per_tensor(at::randn({n, 16, 28, 28}), kScale, kZeroPoint, at::kQUInt8)
        .contiguous(at::MemoryFormat::ChannelsLast);
}

TEST(Int8Graph, EveryBudgetGivesTheSequencesBits) {
    at::manual_seed(0);
    const Graph g = blocks(3);
    const at::Tensor x = input(5);
    const at::Tensor before = x.int_repr().clone();
    const at::Tensor want = in_sequence(x, g);
    for (const char *budget : {"1", "30000", "0"}) {
        ScopedBudget env(budget);
        const at::Tensor got = int8_graph(x, list_of(g.contexts), g.program);
        ASSERT_TRUE(got.is_quantized());
        ASSERT_EQ(got.sizes(), want.sizes()) << budget;
        EXPECT_NEAR(got.q_scale(), want.q_scale(), 1e-8);  // in place the op keeps it as a float
        EXPECT_EQ(got.q_zero_point(), want.q_zero_point());
        EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr())) << "budget " << budget;
        EXPECT_TRUE(at::equal(x.int_repr(), before)) << "the op's input was written, budget " << budget;
    }
}

TEST(Int8Graph, RegisteredOpAndPrograms) {
    at::manual_seed(1);
    const Graph g = blocks(1);
    const at::Tensor x = input(2);
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("ipex::int8_graph", "");
    std::vector<c10::IValue> stack{x, c10::IValue(list_of(g.contexts)), c10::IValue(g.program)};
    op.callBoxed(&stack);
    ASSERT_EQ(stack.size(), 1u);
    EXPECT_TRUE(at::equal(stack[0].toTensor().int_repr(), in_sequence(x, g).int_repr()));
    const auto error_of = [&](std::vector<int64_t> program) {
        try {
            int8_graph(x, list_of(g.contexts), program);
        } catch (const c10::Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(error_of({0, -1, 1, -1}).find("holds 4 values for 3 convolutions"), std::string::npos);
    EXPECT_NE(error_of({0, -1, 1, -1, 2, -1}).find("has a sum post-op and no summand"), std::string::npos);
    EXPECT_NE(error_of({0, -1, 2, -1, 2, 0}).find("convolution 1 reads value 2"), std::string::npos);
    EXPECT_EQ(error_of(g.program), std::string());
}

}  // namespace
}  // namespace ipex::quant
