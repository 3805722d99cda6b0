// ConvolutionContext against fp64 aten convolutions: 1-D/2-D/3-D and transposed, strides,
// padding, dilation, groups, bias; fp32/bf32/bf16; contiguous, channels-last, strided slice and
// unbatched inputs; batch 1 and 3; output layout and dtype; primitive cache bound; errors.
#include <gtest/gtest.h>

#include <sstream>
#include <tuple>

#include "ops/conv_context.h"
#include "ops/onednn_utils.h"
#include "ops/ops.h"
#include "ops/weight_cache.h"
#include "unit/ops/ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using testing::expect_close;

struct ConvCase {
    std::string name;
    int64_t in, out;
    std::vector<int64_t> kernel;  // one per spatial dim
    ConvParams params;
    bool bias;
    std::vector<int64_t> spatial;  // input spatial sizes
};

at::Tensor weight_for(const ConvCase &c) {
    const int64_t g = c.params.groups;
    std::vector<int64_t> shape = c.params.transposed ? std::vector<int64_t>{c.in, c.out / g}
                                                     : std::vector<int64_t>{c.out, c.in / g};
    shape.insert(shape.end(), c.kernel.begin(), c.kernel.end());
    return at::randn(shape) * 0.3;
}

at::Tensor input_for(const ConvCase &c, int64_t batch) {
    std::vector<int64_t> shape{batch, c.in};
    shape.insert(shape.end(), c.spatial.begin(), c.spatial.end());
    return at::randn(shape);
}

ConvParams params(std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                  int64_t groups, bool transposed = false, std::vector<int64_t> output_padding = {}) {
    return ConvParams{std::move(stride), std::move(padding), std::move(dilation), std::move(output_padding), groups,
                      transposed};
}

const std::vector<ConvCase> &cases() {
    static const std::vector<ConvCase> all = {
        {"conv1d_basic", 4, 6, {3}, params({1}, {1}, {1}, 1), true, {17}},
        {"conv1d_strided_dilated_grouped", 6, 4, {5}, params({2}, {2}, {2}, 2), false, {19}},
        {"conv2d_basic", 3, 8, {3, 3}, params({1, 1}, {1, 1}, {1, 1}, 1), true, {7, 9}},
        {"conv2d_stride2_nopad", 4, 8, {3, 3}, params({2, 2}, {0, 0}, {1, 1}, 1), false, {7, 9}},
        {"conv2d_dilated", 8, 8, {3, 3}, params({1, 1}, {2, 2}, {2, 2}, 1), true, {7, 9}},
        {"conv2d_grouped_rect", 8, 12, {3, 1}, params({1, 2}, {1, 0}, {1, 1}, 4), true, {7, 9}},
        {"conv2d_depthwise", 8, 8, {3, 3}, params({2, 2}, {1, 1}, {1, 1}, 8), true, {7, 9}},
        {"conv2d_depthwise_multiplier", 4, 8, {5, 5}, params({1, 1}, {2, 2}, {1, 1}, 4), false, {7, 9}},
        {"conv2d_pointwise", 16, 32, {1, 1}, params({1, 1}, {0, 0}, {1, 1}, 1), true, {7, 9}},
        {"conv2d_asymmetric", 5, 7, {2, 4}, params({3, 1}, {1, 2}, {1, 2}, 1), true, {11, 9}},
        {"conv3d_basic", 2, 4, {3, 3, 3}, params({1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1), true, {5, 6, 7}},
        {"conv3d_grouped_strided", 4, 4, {2, 2, 2}, params({2, 2, 2}, {0, 0, 0}, {1, 1, 1}, 2), false, {6, 7, 5}},
        {"conv_transpose1d", 4, 6, {3}, params({2}, {1}, {1}, 1, true, {1}), true, {9}},
        {"conv_transpose2d_outpad", 4, 6, {3, 3}, params({2, 2}, {1, 1}, {1, 1}, 1, true, {1, 1}), true, {7, 9}},
        {"conv_transpose2d_grouped", 6, 4, {4, 4}, params({2, 2}, {1, 1}, {1, 1}, 2, true, {0, 0}), false, {7, 9}},
        {"conv_transpose2d_dilated", 3, 5, {3, 2}, params({3, 2}, {1, 0}, {2, 1}, 1, true, {2, 1}), true, {7, 9}},
        {"conv_transpose3d_outpad", 2, 4, {3, 3, 3}, params({2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 1, true, {1, 0, 1}),
         true, {3, 4, 5}},
        {"conv_transpose3d_grouped", 4, 6, {2, 3, 2}, params({1, 2, 2}, {0, 1, 0}, {1, 1, 1}, 2, true, {0, 1, 1}),
         true, {4, 3, 5}},
        {"conv_transpose2d_depthwise", 6, 6, {3, 3}, params({2, 2}, {1, 1}, {1, 1}, 6, true, {1, 1}), true, {7, 9}},
        // Kernel = stride (no overlap): run as GEMMs (conv_deconv_gemm.h).
        {"conv_transpose1d_as_gemm", 5, 7, {3}, params({3}, {0}, {1}, 1, true), true, {9}},
        {"conv_transpose2d_as_gemm", 16, 24, {2, 2}, params({2, 2}, {0, 0}, {1, 1}, 1, true), true, {7, 9}},
        {"conv_transpose2d_as_gemm_rect", 6, 5, {2, 3}, params({2, 3}, {0, 0}, {1, 1}, 1, true), false, {5, 4}},
        {"conv_transpose3d_as_gemm", 4, 6, {2, 3, 2}, params({2, 3, 2}, {0, 0, 0}, {1, 1, 1}, 1, true), true,
         {3, 4, 5}},
    };
    return all;
}

// Inputs with the same values in four layouts.
enum class Layout { Contiguous, ChannelsLast, Slice, Unbatched };
const char *layout_name(Layout l) {
    switch (l) {
        case Layout::Contiguous: return "contiguous";
        case Layout::ChannelsLast: return "channels_last";
        case Layout::Slice: return "slice";
        case Layout::Unbatched: return "unbatched";
    }
    return "?";
}

// A non-contiguous view: every other element along the last dim of a wider tensor.
at::Tensor strided_slice(const at::Tensor &x) {
    std::vector<int64_t> wide = x.sizes().vec();
    wide.back() *= 2;
    at::Tensor big = at::randn(wide);
    at::Tensor view = big.slice(-1, 0, wide.back(), 2);
    view.copy_(x);
    return view;
}

class OpsConvGrid : public ::testing::TestWithParam<std::tuple<size_t, std::string>> {};

TEST_P(OpsConvGrid, MatchesAtenReference) {
    at::manual_seed(1);
    const ConvCase &c = cases()[std::get<0>(GetParam())];
    const std::string dtype = std::get<1>(GetParam());
    IPEX_SKIP_WITHOUT_ONEDNN_DTYPE(dtype);
    const at::Tensor w = weight_for(c);
    const at::Tensor b = c.bias ? at::randn({c.out}) : at::Tensor();
    ConvolutionContext ctx(w, c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt, c.params, dtype, {}, false, {});
    const int64_t rank = static_cast<int64_t>(c.spatial.size()) + 2;

    for (int64_t batch : {1, 3}) {
        const at::Tensor x = input_for(c, batch);
        const at::Tensor want = testing::reference_conv(x, w, b, c.params);
        for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast, Layout::Slice, Layout::Unbatched}) {
            if (layout == Layout::Unbatched && batch != 1) continue;
            const std::string what = c.name + " " + dtype + " batch " + std::to_string(batch) + " " + layout_name(layout);
            at::Tensor input;
            switch (layout) {
                case Layout::Contiguous: input = x.contiguous(); break;
                case Layout::ChannelsLast: input = testing::as_channels_last(x); break;
                case Layout::Slice: input = strided_slice(x); break;
                case Layout::Unbatched: input = x.squeeze(0); break;
            }
            if (layout == Layout::Slice) ASSERT_FALSE(input.is_contiguous()) << what;
            const at::Tensor before = input.clone();
            const at::Tensor got = ctx.run(input, c10::nullopt);
            EXPECT_TRUE(input.equal(before)) << what << ": the input was modified";
            EXPECT_EQ(got.scalar_type(), testing::output_type(dtype)) << what;
            if (layout == Layout::Unbatched) {
                ASSERT_EQ(got.dim(), rank - 1) << what;
                expect_close(got, want.squeeze(0), dtype, what);
            } else {
                ASSERT_EQ(got.dim(), rank) << what;
                EXPECT_TRUE(testing::channels_last(got)) << what << ": strides " << got.strides();
                if (rank == 4) EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
                expect_close(got, want, dtype, what);
            }
        }
    }
}

std::string grid_name(const ::testing::TestParamInfo<OpsConvGrid::ParamType> &info) {
    return cases()[std::get<0>(info.param)].name + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllCases, OpsConvGrid,
                         ::testing::Combine(::testing::Range<size_t>(0, cases().size()),
                                            ::testing::Values("fp32", "bf32", "bf16")),
                         grid_name);

class OpsConvContext : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

// A bf16 context takes bf16 activations as well (as in a bf16 graph).
TEST_F(OpsConvContext, Bf16InputOnBf16Context) {
    IPEX_SKIP_WITHOUT_ONEDNN_DTYPE("bf16");
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3, b = at::randn({8});
    const ConvParams p = params({1, 1}, {1, 1}, {1, 1}, 1);
    ConvolutionContext ctx(w.to(at::kBFloat16), b, p, "bf16", {}, false, {2, 4, 7, 9});
    const at::Tensor x = at::randn({2, 4, 7, 9}).to(at::kBFloat16);
    const at::Tensor got = ctx.run(x, c10::nullopt);
    EXPECT_EQ(got.scalar_type(), at::kBFloat16);
    expect_close(got, testing::reference_conv(x, w.to(at::kBFloat16), b, p), "bf16", "bf16 input");
}

// A bf16 input into an fp32 context is converted on entry; the output stays fp32.
TEST_F(OpsConvContext, Bf16InputOnFp32Context) {
    const at::Tensor w = at::randn({6, 3, 3, 3}) * 0.3;
    const ConvParams p = params({1, 1}, {0, 0}, {1, 1}, 1);
    ConvolutionContext ctx(w, c10::nullopt, p, "fp32", {}, false, {});
    const at::Tensor x = at::randn({1, 3, 8, 8}).to(at::kBFloat16);
    const at::Tensor got = ctx.run(x, c10::nullopt);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    expect_close(got, testing::reference_conv(x, w, at::Tensor(), p), "fp32", "bf16 input, fp32 ctx");
}

// The input hint prepacks one shape; other shapes pack on first use, and the hint can be
// smaller than the kernel (no prepack then) without failing construction.
TEST_F(OpsConvContext, InputHintAndOtherShapes) {
    const at::Tensor w = at::randn({4, 4, 5, 5}) * 0.3;
    const ConvParams p = params({1, 1}, {0, 0}, {1, 1}, 1);
    ConvolutionContext hinted(w, c10::nullopt, p, "fp32", {}, false, {2, 4, 10, 10});
    EXPECT_EQ(hinted.cached_shapes(), 1u);
    ConvolutionContext tiny(w, c10::nullopt, p, "fp32", {}, false, {1, 4, 2, 2});
    EXPECT_EQ(tiny.cached_shapes(), 0u);
    for (auto *ctx : {&hinted, &tiny}) {
        const at::Tensor x = at::randn({3, 4, 6, 11});
        expect_close(ctx->run(x, c10::nullopt), testing::reference_conv(x, w, at::Tensor(), p), "fp32", "hint");
    }
}

// 20 distinct input shapes: the cache keeps at most 16 and every result is right, including
// shapes evicted and packed again.
TEST_F(OpsConvContext, PrimitiveCacheIsBounded) {
    const at::Tensor w = at::randn({8, 3, 3, 3}) * 0.3, b = at::randn({8});
    const ConvParams p = params({1, 1}, {1, 1}, {1, 1}, 1);
    ConvolutionContext ctx(w, b, p, "fp32", {{"relu"}}, false, {});
    for (int round = 0; round < 2; ++round) {
        for (int64_t i = 0; i < 20; ++i) {
            const at::Tensor x = at::randn({1 + i % 3, 3, 5 + i, 4 + (i * 7) % 5});
            const at::Tensor want = at::relu(testing::reference_conv(x, w, b, p));
            expect_close(ctx.run(x, c10::nullopt), want, "fp32", "shape " + std::to_string(i));
            EXPECT_LE(ctx.cached_shapes(), 16u);
        }
    }
    EXPECT_GE(ctx.cached_shapes(), 1u);
}

// A 3x3 convolution fed 50 input sizes. In fp32 on AVX-512 oneDNN's brgconv blocks the
// weights two ways depending on the size and takes only its own layout for each (the other
// would fall to the reference kernel, which prefer_packed refuses): two packed copies, shared
// by all 50 sizes, never one per size. In bf16 one layout serves every size.
TEST_F(OpsConvContext, FiftyInputSizesShareThePackedWeight) {
    at::manual_seed(9);
    const at::Tensor w = at::randn({64, 64, 3, 3}) * 0.05, b = at::randn({64});
    const ConvParams p = params({1, 1}, {1, 1}, {1, 1}, 1);
    for (const std::string dtype : {"fp32", "bf16"}) {
        if (!ipex::testing::onednn_runs(dtype)) continue;
        ConvolutionContext ctx(w, b, p, dtype, {}, false, {});
        for (int64_t i = 1; i <= 50; ++i) {
            const int64_t h = (i * 7) % 37 + 5, wd = (i * 11) % 31 + 5;
            const at::Tensor x = at::randn({1 + i % 2, 64, h, wd});
            expect_close(ctx.run(x, c10::nullopt), testing::reference_conv(x, w, b, p), dtype,
                         dtype + " size " + std::to_string(h) + "x" + std::to_string(wd));
        }
        EXPECT_LE(ctx.packed_layouts(), dtype == "fp32" ? 2u : 1u) << dtype;
        EXPECT_LE(ctx.cached_shapes(), 16u);
    }
}

// A transposed convolution whose kernel equals its stride runs as oneDNN matmuls written into the
// output through strides, with its post-ops (an activation, a residual sum) in them; the same
// geometry with padding or groups runs oneDNN's deconvolution.
TEST_F(OpsConvContext, NonOverlappingTransposedConvolutionRunsAsGemm) {
    at::manual_seed(5);
    const at::Tensor w = at::randn({32, 16, 2, 2}) * 0.2, b = at::randn({16});
    const ConvParams p = params({2, 2}, {0, 0}, {1, 1}, 1, true);
    ConvolutionContext relu(w, b, p, "fp32", {{"relu"}}, false, {});
    const at::Tensor x = at::randn({3, 32, 6, 5});
    const at::Tensor want = testing::reference_conv(x, w, b, p);
    expect_close(relu.run(x, c10::nullopt), at::relu(want), "fp32", "relu");
    EXPECT_EQ(relu.onednn_kernel(x.sizes().vec(), at::kFloat).first.rfind("gemm deconvolution", 0), 0u)
        << relu.onednn_kernel(x.sizes().vec(), at::kFloat).first;
    // A batch written part by part into one output (the chain op's way).
    const at::Tensor out = empty_channels_last({3, 16, 12, 10}, at::kFloat);
    relu.run_into(x.narrow(0, 0, 2), out.narrow(0, 0, 2));
    relu.run_into(x.narrow(0, 2, 1), out.narrow(0, 2, 1));
    expect_close(out, at::relu(want), "fp32", "run_into");
    // A residual sum, then an activation.
    ConvolutionContext sum(w, b, p, "fp32", {{"sum", 1.0}, {"relu"}}, false, {});
    const at::Tensor other = at::randn({3, 16, 12, 10});
    expect_close(sum.run(x, other), at::relu(want + other), "fp32", "sum");
    // Padding, output padding or groups: overlapping or split blocks, oneDNN's deconvolution.
    for (const ConvParams &q : {params({2, 2}, {1, 1}, {1, 1}, 1, true), params({2, 2}, {0, 0}, {1, 1}, 2, true),
                                params({2, 2}, {0, 0}, {1, 1}, 1, true, {1, 1})}) {
        const at::Tensor wq = q.groups == 2 ? at::randn({32, 8, 2, 2}) * 0.2 : w;
        ConvolutionContext ctx(wq, b, q, "fp32", {}, false, {});
        EXPECT_NE(ctx.onednn_kernel(x.sizes().vec(), at::kFloat).first.rfind("gemm deconvolution", 0), 0u);
        expect_close(ctx.run(x, c10::nullopt), testing::reference_conv(x, wq, b, q), "fp32", "deconvolution");
    }
}

TEST_F(OpsConvContext, WeightCacheMakesADeferredPlainWeightOnFirstUseOnly) {
    int made = 0;
    const at::Tensor w = at::randn({4, 3, 2, 2});
    WeightCache cache({4, 3, 2, 2}, [&] {
        ++made;
        return w.clone();
    });
    EXPECT_EQ(cache.sizes(), (std::vector<int64_t>{4, 3, 2, 2}));
    EXPECT_EQ(made, 0) << "sizes() must not make the weight";
    const dnnl::memory::desc desc({4, 3, 2, 2}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ohwi);
    const WeightCache::Packed packed = cache.get(desc);
    EXPECT_EQ(made, 1);
    // The reordered copy holds the weight's values in the asked layout.
    const at::Tensor back = packed.buffer.view(at::kFloat).view({4, 2, 2, 3}).permute({0, 3, 1, 2});
    EXPECT_TRUE(at::equal(back, w));
    EXPECT_TRUE(at::equal(cache.plain(), w));
    cache.get(dnnl::memory::desc({4, 3, 2, 2}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::oihw));
    EXPECT_EQ(made, 1);
}

TEST_F(OpsConvContext, RejectsWrongChannelCount) {
    ConvolutionContext ctx(at::randn({8, 4, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 1), "fp32", {},
                           false, {});
    const std::string msg = testing::error_of([&] { ctx.run(at::randn({1, 5, 8, 8}), c10::nullopt); });
    EXPECT_NE(msg.find("expected 4 input channels"), std::string::npos) << msg;
    // Transposed: the weight's first dim is the input channel count.
    ConvolutionContext t(at::randn({6, 2, 3, 3}), c10::nullopt, params({2, 2}, {1, 1}, {1, 1}, 1, true), "fp32", {},
                         false, {});
    const std::string tmsg = testing::error_of([&] { t.run(at::randn({1, 2, 8, 8}), c10::nullopt); });
    EXPECT_NE(tmsg.find("expected 6 input channels"), std::string::npos) << tmsg;
}

TEST_F(OpsConvContext, RejectsWrongRank) {
    ConvolutionContext ctx(at::randn({8, 4, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 1), "fp32", {},
                           false, {});
    for (const auto &shape : {std::vector<int64_t>{4, 8}, std::vector<int64_t>{1, 4, 8, 8, 8},
                              std::vector<int64_t>{4}}) {
        const std::string msg = testing::error_of([&] { ctx.run(at::randn(shape), c10::nullopt); });
        EXPECT_NE(msg.find("expected a 3-D or 4-D input"), std::string::npos) << msg;
    }
    // A 3-D input is an unbatched image (as in aten): here with 1 channel, not 4.
    const std::string msg = testing::error_of([&] { ctx.run(at::randn({1, 4, 8}), c10::nullopt); });
    EXPECT_NE(msg.find("expected 4 input channels"), std::string::npos) << msg;
}

TEST_F(OpsConvContext, RejectsTooSmallInput) {
    ConvolutionContext ctx(at::randn({8, 4, 5, 5}), c10::nullopt, params({1, 1}, {0, 0}, {1, 1}, 1), "fp32", {},
                           false, {});
    const std::string msg = testing::error_of([&] { ctx.run(at::randn({1, 4, 4, 9}), c10::nullopt); });
    EXPECT_NE(msg.find("too small"), std::string::npos) << msg;
}

TEST_F(OpsConvContext, RejectsIntegerInput) {
    ConvolutionContext ctx(at::randn({8, 4, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 1), "fp32", {},
                           false, {});
    const std::string msg = testing::error_of([&] { ctx.run(at::ones({1, 4, 8, 8}, at::kInt), c10::nullopt); });
    EXPECT_NE(msg.find("floating-point input"), std::string::npos) << msg;
}

TEST_F(OpsConvContext, RejectsBadConstruction) {
    const auto make = [](at::Tensor w, c10::optional<at::Tensor> b, ConvParams p, std::string dtype = "fp32") {
        return testing::error_of([&] { ConvolutionContext(w, b, p, dtype, {}, false, {}); });
    };
    const ConvParams p2 = params({1, 1}, {1, 1}, {1, 1}, 1);
    EXPECT_NE(make(at::randn({8, 4}), c10::nullopt, p2).find("3-D to 5-D"), std::string::npos);
    EXPECT_NE(make(at::randn({8, 4, 3, 3}), at::randn({7}), p2).find("does not match 8 output channels"),
              std::string::npos);
    EXPECT_NE(make(at::randn({8, 4, 3, 3}), c10::nullopt, params({1}, {1, 1}, {1, 1}, 1)).find("stride has 1 values"),
              std::string::npos);
    EXPECT_NE(make(at::randn({8, 4, 3, 3}), c10::nullopt, params({1, 1}, {1, 1}, {1, 1}, 3)).find("groups"),
              std::string::npos);
    EXPECT_NE(make(at::randn({8, 4, 3, 3}), c10::nullopt, params({0, 1}, {1, 1}, {1, 1}, 1)).find("stride value 0"),
              std::string::npos);
    EXPECT_NE(make(at::randn({4, 4, 3, 3}), c10::nullopt, params({1, 1}, {0, 0}, {1, 1}, 1, true, {1, 1}))
                  .find("output_padding"),
              std::string::npos);
    EXPECT_NE(make(at::randn({8, 4, 3, 3}), c10::nullopt, p2, "int8").find("unknown compute dtype"), std::string::npos);
    EXPECT_NE(make(at::ones({8, 4, 3, 3}, at::kInt), c10::nullopt, p2).find("floating point"), std::string::npos);
}

// fp32 always runs; bf32 and bf16 run where the CPU has AVX-512, else are reported
// unsupported with oneDNN's reason; fp16 either runs correctly or is reported unsupported with
// a reason, and then building a context fails with a c10::Error too.
TEST_F(OpsConvContext, DtypeSupport) {
    std::string why;
    EXPECT_TRUE(dtype_supported("fp32", &why)) << why;
    const bool avx512 = own_kernels::available(false);
    for (const char *dtype : {"bf32", "bf16"}) {
        why.clear();
        const bool supported = dtype_supported(dtype, &why);
        if (avx512) EXPECT_TRUE(supported) << dtype << ": " << why;
        if (!supported) EXPECT_NE(why.find("oneDNN has no"), std::string::npos) << why;
    }
    why.clear();
    EXPECT_FALSE(dtype_supported("int8", &why));
    EXPECT_NE(why.find("unknown compute dtype"), std::string::npos) << why;
    why.clear();
    const at::Tensor w = at::randn({8, 4, 3, 3}) * 0.3;
    const ConvParams p = params({1, 1}, {1, 1}, {1, 1}, 1);
    if (dtype_supported("fp16", &why)) {
        ConvolutionContext ctx(w.to(at::kHalf), c10::nullopt, p, "fp16", {}, false, {});
        const at::Tensor x = at::randn({2, 4, 7, 9});
        const at::Tensor got = ctx.run(x, c10::nullopt);
        EXPECT_EQ(got.scalar_type(), at::kHalf);
        expect_close(got, testing::reference_conv(x, w.to(at::kHalf), at::Tensor(), p), "fp16", "fp16");
    } else {
        EXPECT_FALSE(why.empty());
        const std::string msg =
            testing::error_of([&] { ConvolutionContext(w.to(at::kHalf), c10::nullopt, p, "fp16", {}, false, {}); });
        EXPECT_FALSE(msg.empty());
    }
}

// flops(): 2 x output positions x weight elements;
// transposed convolutions count input positions; unbatched inputs are one image; sizes of
// another rank or too small for the kernel give 0.
TEST_F(OpsConvContext, FlopsCountEveryMultiplyAdd) {
    const ConvParams p = params({2, 1}, {1, 0}, {1, 2}, 2);  // 8x2x3x3 weight: 4 inputs in 2 groups
    ConvolutionContext ctx(at::randn({8, 2, 3, 3}), c10::nullopt, p, "fp32", {}, false, {});
    // Output rows (9 + 2 - 3) / 2 + 1 = 5, columns (11 - (3 - 1) x 2 - 1) / 1 + 1 = 7.
    const int64_t positions = 5 * 7;
    EXPECT_EQ(ctx.flops({3, 4, 9, 11}), 2 * 3 * positions * 8 * 2 * 3 * 3);
    EXPECT_EQ(ctx.flops({4, 9, 11}), 2 * positions * 8 * 2 * 3 * 3);
    EXPECT_EQ(ctx.flops({3, 4, 9, 4}), 0);  // too few columns for the dilated kernel
    EXPECT_EQ(ctx.flops({3, 4, 9, 11, 2}), 0);
    const ConvParams t = params({2, 2}, {1, 1}, {1, 1}, 1, true);
    ConvolutionContext up(at::randn({4, 6, 3, 3}), c10::nullopt, t, "fp32", {}, false, {});
    EXPECT_EQ(up.flops({2, 4, 5, 7}), 2 * 2 * 5 * 7 * 4 * 6 * 3 * 3);  // every input position meets the weight
}

// A weight that is a non-contiguous view packs the same as its contiguous copy.
TEST_F(OpsConvContext, NonContiguousWeight) {
    const at::Tensor w = (at::randn({3, 3, 4, 8}) * 0.3).permute({3, 2, 0, 1});
    ASSERT_FALSE(w.is_contiguous());
    const ConvParams p = params({1, 1}, {1, 1}, {1, 1}, 1);
    ConvolutionContext ctx(w, c10::nullopt, p, "fp32", {}, false, {});
    const at::Tensor x = at::randn({2, 4, 7, 9});
    expect_close(ctx.run(x, c10::nullopt), testing::reference_conv(x, w, at::Tensor(), p), "fp32", "permuted weight");
}

TEST_F(OpsConvContext, DescribeNamesTheConvolution) {
    // bf16 where oneDNN has it (AVX-512), else fp32: the dtype is named either way.
    const std::string dtype = ipex::testing::onednn_lacks("bf16").empty() ? "bf16" : "fp32";
    ConvolutionContext ctx(at::randn({8, 2, 3, 3}), c10::nullopt, params({2, 2}, {1, 1}, {1, 1}, 2), dtype,
                           {{"clip", 0, 6}}, false, {});
    EXPECT_EQ(ctx.describe(), "conv2d 4->8 k3x3 s2x2 p1x1 d1x1 g2 " + dtype + " +clip(0,6)");
}

}  // namespace
}  // namespace ipex::ops
