// ipex::int8_graph (ops/int8/int8_graph.h): int8 residual blocks run a few images at a time give
// the bits of the same contexts run one after the other on the whole batch (integer sums,
// requantized per value), under every budget; contexts that sum in place never write over the
// op's input or a value read later; the registered op; a program that does not fit.
// ipex::int8_conv_max_pool: a stem-like strided convolution and its pooling, a part of the batch
// at a time, give the bits of the two ops one after the other, for pooling geometries with
// padding, dilation and ceil mode; the part size seen from the convolution's cached shapes; bad
// arguments; the registered op.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ops/int8/int8_context.h"
#include "ops/int8/int8_graph.h"
#include "ops/int8/int8_stem.h"
#include "own_kernel_checks.h"

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

// A first block whose summand is a 1x1 downsample convolution (a step without a sum, its own
// output scale) and a second adding the first's output: the last value is a chain of sums in
// place over the downsample's output, which from the second part of a batch on is written
// straight into the batch's output (run_into), each value at its own scale. `s8_sums`: the
// downsample writes u8, the sums s8 over it (in place: the same bytes, another type).
Graph downsample_blocks(bool s8_sums) {
    const at::ScalarType sums = s8_sums ? at::kQInt8 : at::kQUInt8;
    const auto make = [](Int8Params p, std::vector<int64_t> sizes) {
        const at::Tensor w = at::randn(sizes) * 0.2;
        std::vector<double> scales(sizes[0], w.abs().max().item<double>() / 127.0);
        return c10::make_intrusive<Int8Context>(w, at::randn({sizes[0]}) * 0.1, scales, p);
    };
    const auto params = [&](const Ctx &c, double in_scale, at::ScalarType in, double out_scale, at::ScalarType out,
                            double other_scale, at::ScalarType other) {
        Int8Params p = c->params();
        p.in_scale = in_scale;
        p.in_dtype = in;
        p.out_scale = out_scale;
        p.out_dtype = out;
        p.other_scale = other_scale;
        p.other_dtype = other;
        if (in == at::kQInt8) p.in_zero_point = 0;
        if (out == at::kQInt8) p.out_zero_point = 0;
        if (other == at::kQInt8) p.other_zero_point = 0;
        return p;
    };
    const at::ScalarType u8 = at::kQUInt8;
    Graph g;
    const Ctx ds = conv(16, 32, 1, false, false), c1 = conv(16, 4, 1, true, false), c3 = conv(4, 32, 1, false, true);
    const Ctx c4 = conv(32, 4, 1, true, false), c5 = conv(4, 32, 3, false, true);
    g.contexts.push_back(make(params(ds, kScale, u8, 0.07, u8, kScale, u8), {32, 16, 1, 1}));   // value 1
    g.contexts.push_back(make(params(c1, kScale, u8, kScale, u8, kScale, u8), {4, 16, 1, 1}));  // value 2
    g.contexts.push_back(make(params(c3, kScale, u8, 0.09, sums, 0.07, u8), {32, 4, 1, 1}));   // 3: 2 + 1 in place
    g.contexts.push_back(make(params(c4, 0.09, sums, kScale, u8, kScale, u8), {4, 32, 1, 1}));  // value 4 (reads 3)
    g.contexts.push_back(make(params(c5, kScale, u8, 0.11, sums, 0.09, sums), {32, 4, 3, 3}));  // 5: 4 + 3 in place
    g.program = {0, -1, 0, -1, 2, 1, 3, -1, 4, 3};
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

TEST(Int8Graph, SumsInPlaceOverADownsampleWriteIntoTheBatch) {
    for (bool s8_sums : {false, true}) {
        at::manual_seed(4);
        const Graph g = downsample_blocks(s8_sums);
        const at::Tensor x = input(5);
        const at::Tensor want = in_sequence(x, g);
        for (const char *budget : {"1", "30000", "0"}) {
            ScopedBudget env(budget);
            const at::Tensor got = int8_graph(x, list_of(g.contexts), g.program);
            ASSERT_EQ(got.sizes(), want.sizes()) << budget;
            EXPECT_EQ(got.scalar_type(), s8_sums ? at::kQInt8 : at::kQUInt8);
            EXPECT_NEAR(got.q_scale(), 0.11, 1e-8);
            EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr())) << "budget " << budget << " s8 " << s8_sums;
            EXPECT_GT(want.int_repr().to(at::kFloat).std().item<float>(), 1.0f);
        }
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

// A stride-2 7x7 convolution with relu on `in` channels (3: a ResNet stem), u8 in and out unless
// told.
Ctx stem(int64_t out, int64_t in = 3, at::ScalarType in_dtype = at::kQUInt8, at::ScalarType out_dtype = at::kQUInt8) {
    Int8Params p;
    p.kind = "conv2d";
    p.stride = {2, 2};
    p.padding = {3, 3};
    p.dilation = {1, 1};
    p.in_scale = 0.02;
    p.in_zero_point = in_dtype == at::kQInt8 ? -5 : 120;
    p.in_dtype = in_dtype;
    p.out_scale = kScale;
    p.out_zero_point = out_dtype == at::kQInt8 ? -20 : 0;
    p.out_dtype = out_dtype;
    p.relu = true;
    const at::Tensor w = at::randn({out, in, 7, 7}) / std::sqrt(49.0 * in);
    std::vector<double> scales(out, w.abs().max().item<double>() / 127.0);
    return c10::make_intrusive<Int8Context>(w, at::randn({out}) * 0.1, scales, p);
}

struct Pooling {
    std::vector<int64_t> kernel, stride, padding, dilation;
    bool ceil;
};

// The op's bits against the convolution's and then aten's pooling, with the convolution's kernel
// chosen by IPEX_CONV_KERNELS (`kernels`) when the context is made.
void expect_the_sequences_bits(const char *kernels) {
    SCOPED_TRACE(std::string("IPEX_CONV_KERNELS=") + kernels);
    at::manual_seed(2);
    const Ctx c = [&] {
        KernelsVariable v(kernels);
        return stem(16);
    }();
    const at::Tensor x = at::quantize_per_tensor(at::randn({6, 3, 96, 90}), 0.02, 120, at::kQUInt8)
                             .contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor before = x.int_repr().clone();
    for (const Pooling &pool : std::vector<Pooling>{{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},   // ResNet's
                                                    {{3, 3}, {2, 2}, {0, 0}, {1, 1}, true},    // ceil mode
                                                    {{2, 3}, {1, 2}, {1, 0}, {2, 1}, false},   // dilated
                                                    {{2}, {}, {0}, {1}, false}}) {             // stride = kernel
        // aten's quantized pooling reads two values of each list: the single ones given twice.
        const auto pair = [](const std::vector<int64_t> &v, const std::vector<int64_t> &empty_as) {
            return v.empty() ? empty_as : std::vector<int64_t>{v.front(), v.back()};
        };
        const std::vector<int64_t> kernel = pair(pool.kernel, {});
        const at::Tensor want = at::max_pool2d(c->run(x, c10::nullopt), kernel, pair(pool.stride, kernel),
                                               pair(pool.padding, {}), pair(pool.dilation, {}), pool.ceil);
        for (const char *budget : {"1", "20000", "0"}) {
            ScopedBudget env(budget);
            const at::Tensor got =
                int8_conv_max_pool(x, c, pool.kernel, pool.stride, pool.padding, pool.dilation, pool.ceil);
            ASSERT_TRUE(got.is_quantized());
            ASSERT_EQ(got.sizes(), want.sizes()) << budget;
            EXPECT_EQ(got.q_zero_point(), want.q_zero_point());
            EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr())) << "budget " << budget;
            EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
        }
        // The pooling step's sizes (what the runner plans parts by) are the pooling's.
        const auto steps =
            int8_conv_max_pool_steps(c, pool.kernel, pool.stride, pool.padding, pool.dilation, pool.ceil);
        ASSERT_EQ(steps.size(), 2u);
        const std::vector<int64_t> conv_sizes = steps[0].output_sizes(x.sizes().vec());
        EXPECT_EQ(steps[1].output_sizes(conv_sizes), want.sizes().vec());
        EXPECT_EQ(steps[1].output_sizes({1, 16, 0, 5}), std::vector<int64_t>());
    }
    EXPECT_TRUE(at::equal(x.int_repr(), before)) << "the op's input was written";
}

// oneDNN's convolution (the two steps a part at a time), the stem kernel (convolution and pooling
// in one pass) and the timed choice.
TEST(Int8ConvMaxPool, EveryBudgetGivesTheSequencesBits) {
    for (const char *kernels : {"0", "1", "auto"}) expect_the_sequences_bits(kernels);
}

// The stem kernel's one pass against its convolution and then aten's pooling, bit for bit: u8/s8
// in and out, 1-4 input channels, output channels below, at and past 64 (pooled 64 at a time
// with a tail), batches the threads split inside an image (1) and across images (3), pooling
// windows taller and shorter than their stride, dilated, padded, in ceil mode. No oneDNN
// primitive is made: the op did not run the two steps.
TEST(Int8ConvMaxPool, OneStemPassGivesTheSequencesBits) {
    if (!stem::available()) GTEST_SKIP() << "this CPU has no AVX512-VNNI: the stem kernel does not run";
    KernelsVariable v("1");
    at::manual_seed(5);
    const std::vector<Pooling> poolings{{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, {{3, 3}, {2, 2}, {0, 0}, {1, 1}, true},
                                        {{2, 3}, {1, 2}, {1, 0}, {2, 1}, false}, {{2, 2}, {3, 3}, {0, 1}, {1, 1}, true},
                                        {{5, 1}, {1, 1}, {2, 0}, {1, 1}, false}};
    int runs = 0;
    for (at::ScalarType in : {at::kQUInt8, at::kQInt8})
        for (at::ScalarType out : {at::kQUInt8, at::kQInt8})
            for (int64_t channels : {1, 3, 4})
                for (int64_t out_channels : {16, 64, 80}) {
                    if ((channels != 3) + (out_channels != 64) + (in != out) > 1) continue;  // a sample
                    const Ctx c = stem(out_channels, channels, in, out);
                    for (int64_t batch : {1, 3}) {
                        const at::Tensor x = at::quantize_per_tensor(at::randn({batch, channels, 37, 30}), 0.02,
                                                                     in == at::kQInt8 ? -5 : 120, in)
                                                 .contiguous(at::MemoryFormat::ChannelsLast);
                        const at::Tensor before = x.int_repr().clone();
                        const at::Tensor conv = c->run(x, c10::nullopt);
                        for (const Pooling &pool : poolings) {
                            const at::Tensor want =
                                at::max_pool2d(conv, pool.kernel, pool.stride, pool.padding, pool.dilation, pool.ceil);
                            const at::Tensor got = int8_conv_max_pool(x, c, pool.kernel, pool.stride, pool.padding,
                                                                      pool.dilation, pool.ceil);
                            ASSERT_EQ(got.sizes(), want.sizes());
                            ASSERT_EQ(got.scalar_type(), out);
                            EXPECT_EQ(got.q_zero_point(), want.q_zero_point());
                            EXPECT_DOUBLE_EQ(got.q_scale(), want.q_scale());
                            EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
                            EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr()))
                                << channels << " -> " << out_channels << " channels, batch " << batch << ", kernel "
                                << at::IntArrayRef(pool.kernel) << " stride " << at::IntArrayRef(pool.stride);
                            ++runs;
                        }
                        EXPECT_TRUE(at::equal(x.int_repr(), before)) << "the op's input was written";
                        EXPECT_GT(conv.int_repr().to(at::kFloat).std().item<double>(), 1.0);  // not a constant output
                    }
                    EXPECT_EQ(c->cached_shapes(), 0u) << "a oneDNN primitive ran";
                }
    EXPECT_GE(runs, 60);
}

// An fp32 input (NCHW or channels-last; bf16 too) gives the bits of ipex::quantize_per_tensor with
// the context's input parameters and then the op, by the stem kernel's pass (quantizing rows as
// it reads them) and by oneDNN's steps; the input is not written.
TEST(Int8ConvMaxPool, Fp32InputIsQuantizedWithTheContextsParameters) {
    at::manual_seed(6);
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("ipex::quantize_per_tensor", "");
    int runs = 0;
    for (const char *kernels : {"1", "0"})
        for (at::ScalarType in : {at::kQUInt8, at::kQInt8}) {
            if (std::string(kernels) == "1" && !stem::available()) continue;
            const Ctx c = [&] {
                KernelsVariable v(kernels);
                return stem(64, 3, in, at::kQUInt8);
            }();
            const Int8Params &p = c->params();
            for (int64_t batch : {1, 3}) {
                const at::Tensor planes = at::randn({batch, 3, 45, 38}) * 3;
                for (const at::Tensor &x : {planes, planes.contiguous(at::MemoryFormat::ChannelsLast),
                                            planes.to(at::kBFloat16)}) {
                    const at::Tensor before = x.clone();
                    std::vector<c10::IValue> stack{x, p.in_scale, p.in_zero_point, static_cast<int64_t>(p.in_dtype)};
                    op.callBoxed(&stack);
                    const at::Tensor want =
                        int8_conv_max_pool(stack[0].toTensor(), c, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
                    const at::Tensor got = int8_conv_max_pool(x, c, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
                    ASSERT_EQ(got.sizes(), want.sizes());
                    EXPECT_EQ(got.scalar_type(), want.scalar_type());
                    EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr()))
                        << "IPEX_CONV_KERNELS=" << kernels << " " << x.scalar_type() << " batch " << batch;
                    EXPECT_TRUE(at::equal(x, before)) << "the op's input was written";
                    ++runs;
                }
            }
            if (std::string(kernels) == "1") EXPECT_EQ(c->cached_shapes(), 0u) << "a oneDNN primitive ran";
        }
    EXPECT_GE(runs, 12);
}

// Under a budget of one image's convolution output the convolution runs an image at a time (its
// primitive cached for a batch of 1), without one on the whole batch.
TEST(Int8ConvMaxPool, RunsAPartOfTheBatchAtATime) {
    at::manual_seed(3);
    // 16 x 64 x 64 u8 = 64 KB of convolution output an image, 32 x 32 pooled pixels (at least
    // kGraphMinPartPixels in each step).
    const at::Tensor x = at::quantize_per_tensor(at::randn({4, 3, 128, 128}), 0.02, 120, at::kQUInt8)
                             .contiguous(at::MemoryFormat::ChannelsLast);
    for (const auto &[budget, cached] : std::vector<std::pair<const char *, size_t>>{{"70000", 1}, {"0", 1}}) {
        ScopedBudget env(budget);
        KernelsVariable v("0");  // the stem kernel pools as it goes and has no parts
        const Ctx c = stem(16);
        const at::Tensor got = int8_conv_max_pool(x, c, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
        EXPECT_EQ(c->cached_shapes(), cached);
        const at::Tensor one = x.slice(0, 0, 1);
        c->run(one, c10::nullopt);  // adds a shape unless the op ran images one at a time
        EXPECT_EQ(c->cached_shapes(), std::string(budget) == "0" ? 2u : 1u) << budget;
        EXPECT_EQ(got.sizes(), at::IntArrayRef({4, 16, 32, 32}));
    }
}

TEST(Int8ConvMaxPool, RegisteredOpAndErrors) {
    at::manual_seed(4);
    const Ctx c = stem(16);
    const at::Tensor x = at::quantize_per_tensor(at::randn({2, 3, 20, 20}), 0.02, 120, at::kQUInt8)
                             .contiguous(at::MemoryFormat::ChannelsLast);
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("ipex::int8_conv_max_pool", "");
    std::vector<c10::IValue> stack{x, c10::IValue(c), c10::IValue(std::vector<int64_t>{3, 3}),
                                   c10::IValue(std::vector<int64_t>{2, 2}), c10::IValue(std::vector<int64_t>{1, 1}),
                                   c10::IValue(std::vector<int64_t>{1, 1}), c10::IValue(false)};
    op.callBoxed(&stack);
    ASSERT_EQ(stack.size(), 1u);
    const at::Tensor want = at::max_pool2d(c->run(x, c10::nullopt), {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
    EXPECT_TRUE(at::equal(stack[0].toTensor().int_repr(), want.int_repr()));
    const auto error_of = [&](const Ctx &ctx, std::vector<int64_t> k, std::vector<int64_t> p, const at::Tensor &in) {
        try {
            int8_conv_max_pool(in, ctx, k, {2, 2}, p, {1, 1}, false);
        } catch (const c10::Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(error_of(c, {3, 3, 3}, {1, 1}, x).find("kernel_size must have 1 or 2 values"), std::string::npos);
    EXPECT_NE(error_of(c, {3, 3}, {2, 2}, x).find("padding at most half the kernel"), std::string::npos);
    EXPECT_NE(error_of(c, {0, 3}, {0, 0}, x).find("each above 0"), std::string::npos);
    EXPECT_NE(error_of(conv(16, 16, 3, true, true), {3, 3}, {1, 1}, x).find("without a sum"), std::string::npos);
    EXPECT_NE(error_of(c, {3, 3}, {1, 1}, x.slice(1, 0, 2)).find("input has 2 channels, expected 3"),
              std::string::npos);
    EXPECT_EQ(error_of(c, {3, 3}, {1, 1}, x), std::string());
    // An input neither quantized nor float: the quantize's message.
    EXPECT_NE(error_of(c, {3, 3}, {1, 1}, x.int_repr().to(at::kLong)).find("must be a float tensor"),
              std::string::npos);
    EXPECT_NE(error_of(c, {3, 3}, {1, 1}, at::randn({2, 2, 20, 20})).find("input has 2 channels, expected 3"),
              std::string::npos);
}

}  // namespace
}  // namespace ipex::quant
