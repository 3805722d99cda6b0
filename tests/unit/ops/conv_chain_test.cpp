// ipex::convolution_chain (ops/conv_chain_op.h): the convolutions of a chain run a few images at
// a time give the outputs of the same contexts run one after the other, for every split of the
// batch (one image per part, uneven parts, no split), fp32 and bf16, own kernels and oneDNN,
// batched, unbatched and NCHW inputs; the parts' sizes; the errors of a chain that cannot run.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/conv_chain_op.h"
#include "ops/ops.h"
#include "ops/pool_op.h"
#include "ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using testing::KernelChoice;
using testing::ScopedEnv;
using Ctx = c10::intrusive_ptr<ConvolutionContext>;

Ctx conv(int64_t in, int64_t out, int64_t k, int64_t groups, int64_t stride, const std::string &dtype,
         PostOps post_ops = {{"relu"}}) {
    ConvParams p{{stride, stride}, {k / 2, k / 2}, {1, 1}, {0, 0}, groups, false};
    return c10::make_intrusive<ConvolutionContext>(at::randn({out, in / groups, k, k}) * 0.2, at::randn({out}) * 0.1,
                                                   p, dtype, std::move(post_ops), false, std::vector<int64_t>{});
}

ConvChain chain_of(const std::vector<Ctx> &contexts) {
    ConvChain list;
    for (const auto &c : contexts) list.push_back(c);
    return list;
}

at::Tensor in_sequence(const at::Tensor &x, const std::vector<Ctx> &contexts) {
    at::Tensor y = x;
    for (const auto &c : contexts) y = c->run(y, c10::nullopt);
    return y;
}

// A 1x1 expansion, a stride-2 depthwise convolution and a 1x1 projection (MobileNet's block).
std::vector<Ctx> block(const std::string &dtype) {
    return {conv(8, 24, 1, 1, 1, dtype), conv(24, 24, 3, 24, 2, dtype), conv(24, 16, 1, 1, 1, dtype, {})};
}

TEST(ConvChain, EverySplitMatchesTheSequence) {
    at::manual_seed(0);
    for (const char *kernels : {"0", "1"}) {
        KernelChoice choice(kernels);
        for (const std::string dtype : {"fp32", "bf16"}) {
            if (dtype == "bf16" && !own_kernels::available(true) && std::string(kernels) == "1") continue;
            if (!ipex::testing::onednn_runs(dtype)) continue;
            const auto contexts = block(dtype);
            const at::Tensor x = at::randn({5, 8, 19, 17}).contiguous(at::MemoryFormat::ChannelsLast);
            const at::Tensor want = in_sequence(x, contexts);
            // 24 x 19 x 17 expansion values per image: budgets of 1 byte (an image a part),
            // 2.5 images (parts of 2, 2, 1), 0 (no split) and the whole batch.
            const int64_t per_image = 24 * 19 * 17 * (dtype == "bf16" ? 2 : 4);
            for (const int64_t budget : {int64_t{1}, per_image * 5 / 2, int64_t{0}, per_image * 5}) {
                ScopedEnv env("IPEX_CONV_CHAIN_BYTES", std::to_string(budget).c_str());
                const at::Tensor got = convolution_chain(x, chain_of(contexts));
                EXPECT_EQ(got.sizes(), want.sizes());
                EXPECT_EQ(got.scalar_type(), want.scalar_type());
                EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
                const double tolerance = dtype == "bf16" ? 1e-2 : 1e-5;
                EXPECT_LE(testing::max_relative_error(got, want), tolerance)
                    << dtype << " kernels " << kernels << " budget " << budget;
            }
        }
    }
}

TEST(ConvChain, UnbatchedAndNchwInputs) {
    at::manual_seed(1);
    ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "1");
    const auto contexts = block("fp32");
    const at::Tensor nchw = at::randn({3, 8, 12, 10});
    EXPECT_LE(testing::max_relative_error(convolution_chain(nchw, chain_of(contexts)), in_sequence(nchw, contexts)),
              1e-5);
    const at::Tensor image = at::randn({8, 12, 10});
    const at::Tensor got = convolution_chain(image, chain_of(contexts));
    EXPECT_EQ(got.sizes(), (std::vector<int64_t>{16, 6, 5}));
    EXPECT_LE(testing::max_relative_error(got, in_sequence(image, contexts)), 1e-5);
    const at::Tensor bf16_input = at::randn({4, 8, 12, 10}).to(at::kBFloat16);
    EXPECT_LE(testing::max_relative_error(convolution_chain(bf16_input, chain_of(contexts)),
                                          in_sequence(bf16_input, contexts)),
              1e-5);
}

TEST(ConvChain, RegisteredOpTakesAListOfContexts) {
    at::manual_seed(2);
    ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "1");
    const auto contexts = block("fp32");
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(kConvolutionChain, "");
    const at::Tensor x = at::randn({2, 8, 9, 9});
    std::vector<c10::IValue> stack{x, c10::IValue(chain_of(contexts))};
    op.callBoxed(&stack);
    ASSERT_EQ(stack.size(), 1u);
    EXPECT_LE(testing::max_relative_error(stack[0].toTensor(), in_sequence(x, contexts)), 1e-5);
}

// Which batches a chain splits, seen from the shapes its first convolution (a 1x1 one, which has
// an own kernel to choose) runs: a 1x1 expansion before a depthwise layer (about 8 FLOPs per
// byte of the activation between them) one image at a time under a 1-byte budget; a 1x1 and a
// dense 3x3 convolution on 64 channels (320 FLOPs per byte) whole, under any budget.
TEST(ConvChain, OnlyMemoryBoundChainsSplit) {
    if (!own_kernels::available(false)) GTEST_SKIP() << "no AVX-512: the 1x1 convolution has no kernel choice to log";
    at::manual_seed(4);
    ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "1");
    const auto light = block("fp32");
    const std::vector<Ctx> heavy{conv(64, 64, 1, 1, 1, "fp32"), conv(64, 64, 3, 1, 1, "fp32")};
    ASSERT_TRUE(light[0]->has_kernel_choice() && heavy[0]->has_kernel_choice());
    KernelShapeLog log;
    convolution_chain(at::randn({3, 8, 12, 10}), chain_of(light));
    convolution_chain(at::randn({3, 64, 12, 10}), chain_of(heavy));
    EXPECT_EQ(log.shapes_of(light[0].get()), (std::vector<std::vector<int64_t>>{{1, 8, 12, 10}}));
    EXPECT_EQ(log.shapes_of(heavy[0].get()), (std::vector<std::vector<int64_t>>{{3, 64, 12, 10}}));
}

TEST(ConvChain, PartSizes) {
    EXPECT_EQ(chain_part_images(8, 3'200'000, 2'000'000), 1);  // an image above the budget: one a part
    EXPECT_EQ(chain_part_images(8, 450'000, 2'000'000), 4);    // 4 fit: two parts of 4
    EXPECT_EQ(chain_part_images(16, 400'000, 2'000'000), 4);   // 5 fit: four parts of 4, not 5+5+5+1
    EXPECT_EQ(chain_part_images(5, 100, 250), 2);              // 2 fit: 2, 2, 1
    EXPECT_EQ(chain_part_images(8, 100, 800), 8);              // the batch fits
    EXPECT_EQ(chain_part_images(8, 1'000'000, 0), 8);          // budget 0: never split
    EXPECT_EQ(chain_part_images(1, 1'000'000, 1), 1);
    EXPECT_EQ(chain_part_images(0, 1'000'000, 1), 1);
}

TEST(ConvChain, BudgetFromTheEnvironmentOrTheCache) {
    {
        ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "12345");
        EXPECT_EQ(chain_budget_bytes(), 12345);
    }
    {
        ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "0");
        EXPECT_EQ(chain_budget_bytes(), 0);
    }
    ScopedEnv unset("IPEX_CONV_CHAIN_BYTES", nullptr);
    const int64_t cache = chain_budget_bytes();
    EXPECT_GE(cache, int64_t{64} << 10);
    for (const char *bad : {"-5", "lots", "12k", ""}) {
        ScopedEnv env("IPEX_CONV_CHAIN_BYTES", bad);
        EXPECT_EQ(chain_budget_bytes(), cache) << bad;
    }
}

TEST(ConvChain, ErrorsOfTheContextsThemselves) {
    at::manual_seed(3);
    ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "1");
    const auto contexts = block("fp32");
    // No convolution at all.
    EXPECT_THROW(convolution_chain(at::randn({2, 8, 9, 9}), ConvChain()), c10::Error);
    // Channels the first convolution does not take; then a chain whose second convolution
    // does not take the first one's output: the same error as the sequence.
    EXPECT_THROW(convolution_chain(at::randn({2, 6, 9, 9}), chain_of(contexts)), c10::Error);
    const std::vector<Ctx> mismatched{conv(8, 24, 1, 1, 1, "fp32"), conv(16, 16, 3, 1, 1, "fp32")};
    try {
        convolution_chain(at::randn({3, 8, 9, 9}), chain_of(mismatched));
        FAIL() << "a chain whose convolutions do not fit together ran";
    } catch (const c10::Error &e) {
        EXPECT_NE(std::string(e.what()).find("expected 16 input channels"), std::string::npos) << e.what();
    }
    // An input too small for the depthwise kernel after the stride, an integer input.
    const std::vector<Ctx> big_kernel{conv(8, 8, 1, 1, 1, "fp32"), conv(8, 8, 7, 8, 1, "fp32")};
    ConvParams unpadded{{1, 1}, {0, 0}, {1, 1}, {0, 0}, 8, false};
    const Ctx valid = c10::make_intrusive<ConvolutionContext>(at::randn({8, 1, 7, 7}), c10::nullopt, unpadded, "fp32",
                                                              PostOps{}, false, std::vector<int64_t>{});
    EXPECT_THROW(convolution_chain(at::randn({2, 8, 5, 5}), chain_of({big_kernel[0], valid})), c10::Error);
    EXPECT_THROW(convolution_chain(at::ones({2, 8, 9, 9}, at::kLong), chain_of(contexts)), c10::Error);
    // A context that needs a second tensor (a residual sum) cannot be in a chain.
    const Ctx with_sum = conv(8, 8, 1, 1, 1, "fp32", {{"sum", 1.0}});
    EXPECT_THROW(convolution_chain(at::randn({2, 8, 9, 9}), chain_of({with_sum, contexts[1]})), c10::Error);
}

// ipex::convolution_max_pool: the chain's output pooled, for every split of the batch, fp32 and
// bf16, one convolution (a stem: 3 channels, 3x3, stride 2) or a chain, pooling windows with
// padding, dilation and ceil mode; the images a memory-bound stem runs per part; NCHW,
// unbatched and too-small inputs; the registered op.
struct PoolCase {
    std::vector<int64_t> kernel, stride, padding, dilation;
    bool ceil_mode;
};

at::Tensor pooled_sequence(const at::Tensor &x, const std::vector<Ctx> &contexts, const PoolCase &p) {
    return ops::max_pool2d(in_sequence(x, contexts), p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode);
}

at::Tensor pooled_chain(const at::Tensor &x, const std::vector<Ctx> &contexts, const PoolCase &p) {
    return convolution_max_pool(x, chain_of(contexts), p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode);
}

const std::vector<PoolCase> &pool_cases() {
    static const std::vector<PoolCase> cases{
        {{3}, {2}, {0}, {1}, true}, {{3}, {2}, {1}, {1}, false}, {{2}, {}, {0}, {1}, false}, {{3, 2}, {1, 2}, {1, 0}, {2, 1}, true}};
    return cases;
}

TEST(ConvMaxPool, EverySplitMatchesTheSequence) {
    at::manual_seed(5);
    for (const std::string dtype : {"fp32", "bf16"}) {
        if (!ipex::testing::onednn_runs(dtype)) continue;
        ConvParams stem_params{{2, 2}, {0, 0}, {1, 1}, {0, 0}, 1, false};
        const Ctx stem = c10::make_intrusive<ConvolutionContext>(at::randn({16, 3, 3, 3}) * 0.3, at::randn({16}) * 0.1,
                                                                 stem_params, dtype, PostOps{{"relu"}}, false,
                                                                 std::vector<int64_t>{});
        const std::vector<std::vector<Ctx>> chains{{stem}, block(dtype)};
        for (size_t c = 0; c < chains.size(); ++c) {
            const at::Tensor x = at::randn({5, c == 0 ? 3 : 8, 23, 21});
            const at::Tensor y = in_sequence(x, chains[c]);
            const int64_t per_image = y.numel() / 5 * y.element_size();
            for (const PoolCase &p : pool_cases()) {
                const at::Tensor want = pooled_sequence(x, chains[c], p);
                for (const int64_t budget : {int64_t{1}, per_image * 5 / 2, int64_t{0}, per_image * 5}) {
                    ScopedEnv env("IPEX_CONV_CHAIN_BYTES", std::to_string(budget).c_str());
                    const at::Tensor got = pooled_chain(x, chains[c], p);
                    const std::string what = dtype + " chain " + std::to_string(c) + " budget " + std::to_string(budget) +
                                             " kernel " + std::to_string(p.kernel[0]);
                    ASSERT_EQ(got.sizes(), want.sizes()) << what;
                    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << what;
                    EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
                    EXPECT_LE(testing::max_relative_error(got, want), dtype == "bf16" ? 1e-2 : 1e-5) << what;
                }
            }
        }
    }
}

// A 1x1 convolution of 3 channels (3 multiply-adds per output value: memory-bound) before a
// pooling runs an image at a time under a 1-byte budget, whole without a budget; seen from the
// shapes of its timed kernel choice.
TEST(ConvMaxPool, MemoryBoundStemsRunPerImage) {
    if (!own_kernels::available(false)) GTEST_SKIP() << "no AVX-512: the 1x1 convolution has no kernel choice to log";
    at::manual_seed(6);
    const Ctx first = conv(3, 16, 1, 1, 1, "fp32");
    ASSERT_TRUE(first->has_kernel_choice());
    const PoolCase &p = pool_cases()[0];
    KernelShapeLog log;
    {
        ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "1");
        pooled_chain(at::randn({3, 3, 12, 10}), {first}, p);
    }
    {
        ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "0");
        pooled_chain(at::randn({2, 3, 12, 10}), {first}, p);
    }
    EXPECT_EQ(log.shapes_of(first.get()), (std::vector<std::vector<int64_t>>{{1, 3, 12, 10}, {2, 3, 12, 10}}));
}

TEST(ConvMaxPool, LayoutsDtypesErrorsAndTheRegisteredOp) {
    at::manual_seed(8);
    ScopedEnv env("IPEX_CONV_CHAIN_BYTES", "1");
    const auto contexts = block("fp32");
    const PoolCase &p = pool_cases()[1];
    for (const at::Tensor &x : {at::randn({3, 8, 12, 10}).contiguous(at::MemoryFormat::ChannelsLast),
                                at::randn({8, 12, 10}), at::randn({2, 8, 12, 10}).to(at::kBFloat16)}) {
        const at::Tensor want = pooled_sequence(x, contexts, p);
        const at::Tensor got = pooled_chain(x, contexts, p);
        ASSERT_EQ(got.sizes(), want.sizes()) << x.sizes();
        EXPECT_LE(testing::max_relative_error(got, want), 1e-5) << x.sizes();
    }
    // Errors are the convolutions' and the pooling's own.
    EXPECT_THROW(pooled_chain(at::randn({2, 6, 9, 9}), contexts, p), c10::Error);
    EXPECT_THROW(convolution_max_pool(at::randn({2, 8, 9, 9}), ConvChain(), {3}, {2}, {1}, {1}, false), c10::Error);
    EXPECT_THROW(convolution_max_pool(at::randn({2, 8, 4, 4}), chain_of(contexts), {5}, {1}, {0}, {1}, false),
                 c10::Error);  // the 2x2 output is smaller than the window
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(kConvolutionMaxPool, "");
    const at::Tensor x = at::randn({2, 8, 9, 9});
    std::vector<c10::IValue> stack{x, c10::IValue(chain_of(contexts)), c10::IValue(p.kernel), c10::IValue(p.stride),
                                   c10::IValue(p.padding), c10::IValue(p.dilation), c10::IValue(p.ceil_mode)};
    op.callBoxed(&stack);
    ASSERT_EQ(stack.size(), 1u);
    EXPECT_LE(testing::max_relative_error(stack[0].toTensor(), pooled_sequence(x, contexts, p)), 1e-5);
}

}  // namespace
}  // namespace ipex::ops
