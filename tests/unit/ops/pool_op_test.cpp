// ipex::max_pool2d against aten::max_pool2d (a max is exact, so the results must be equal)
// over odd sizes, kernels, strides, padding, dilation and ceil mode, NCHW and channels-last
// inputs in fp32 and bf16, through the path the CPU takes (oneDNN, the own kernel or aten) and
// the own kernel called directly on every CPU, NaN and signed zeros included; the output keeps
// aten's layout; what is not taken (strided views, other ranks and dtypes, bad arguments) runs
// aten, errors included.
// ipex::spatial_mean (the AVX-512 build or the portable one, as the CPU takes) and the portable
// build called directly on every CPU, against an fp64 mean over odd channel counts (vector
// tails), pixel counts across the kernel's chunks, batch 1 and more, every spelling of the two
// spatial dims, with and without keepdim; what the kernel does not take runs aten::mean, errors
// included.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "base/isa.h"
#include "ops/own_kernels.h"
#include "ops/pool_op.h"

namespace ipex::ops {
namespace {

struct PoolArgs {
    std::vector<int64_t> kernel, stride, padding, dilation;
    bool ceil_mode;
};

std::string describe(const at::Tensor &x, const PoolArgs &a) {
    std::ostringstream s;
    s << x.sizes() << " " << x.scalar_type() << (x.is_contiguous() ? " nchw" : " cl") << " k" << at::IntArrayRef(a.kernel)
      << " s" << at::IntArrayRef(a.stride) << " p" << at::IntArrayRef(a.padding) << " d" << at::IntArrayRef(a.dilation)
      << (a.ceil_mode ? " ceil" : "");
    return s.str();
}

const char *name(PoolPath path) {
    return path == PoolPath::onednn ? "oneDNN" : path == PoolPath::own ? "own kernel" : "aten";
}

// ipex::max_pool2d takes `want` and gives aten's bits, in aten's layout. Where that is not the
// own kernel, the own kernel called directly on the channels-last input gives them too.
void expect_same_as_aten(const at::Tensor &x, const PoolArgs &a, PoolPath want) {
    const std::string what = describe(x, a);
    EXPECT_EQ(name(max_pool2d_path(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode)), name(want)) << what;
    const at::Tensor expected = at::max_pool2d(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
    const at::Tensor got = ops::max_pool2d(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
    ASSERT_EQ(got.sizes(), expected.sizes()) << what;
    EXPECT_EQ(got.scalar_type(), x.scalar_type()) << what;
    EXPECT_TRUE(at::equal(got, expected)) << what << "\ngot " << got << "\nwant " << expected;
    if (x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous())
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
    else if (x.is_contiguous())
        EXPECT_TRUE(got.is_contiguous()) << what;
    if (want == PoolPath::aten || !(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16)) return;
    const at::Tensor cl = x.contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor own = max_pool2d_own_kernel(cl, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
    EXPECT_TRUE(own.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
    EXPECT_TRUE(at::equal(own, expected)) << what << " (own kernel)\ngot " << own << "\nwant " << expected;
}

// What max_pool2d should take for a valid fp32 / bf16 4-D input: oneDNN on AVX-512 CPUs unless
// the right padding would cut a window, else the own kernel for channels-last inputs.
PoolPath expected_path(const at::Tensor &x, bool cut_by_right_padding) {
    if (isa::avx512()) return cut_by_right_padding ? PoolPath::aten : PoolPath::onednn;
    return x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous() ? PoolPath::own : PoolPath::aten;
}

TEST(MaxPool2d, MatchesAtenOverShapesAndArguments) {
    at::manual_seed(0);
    const std::vector<PoolArgs> cases = {
        {{3}, {2}, {1}, {1}, false},        // ResNet's stem
        {{3}, {2}, {0}, {1}, true},         // ShuffleNet / SqueezeNet
        {{2}, {}, {0}, {1}, false},         // stride = kernel
        {{3, 2}, {1, 2}, {1, 0}, {1}, false},
        {{3}, {3}, {1}, {2}, false},        // dilation
        {{5}, {2}, {2}, {1}, true},
        {{1}, {1}, {0}, {1}, false},
        {{4, 3}, {3, 1}, {2, 1}, {1, 2}, true},
        {{3}, {2}, {1}, {1}, true},
    };
    int counts[3] = {0, 0, 0};
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const std::vector<int64_t> &shape : std::vector<std::vector<int64_t>>{
                 {2, 3, 17, 19}, {1, 16, 8, 8}, {3, 24, 15, 16}, {2, 35, 23, 9}}) {
            const at::Tensor nchw = at::randn(shape).to(dtype);
            const at::Tensor cl = nchw.contiguous(at::MemoryFormat::ChannelsLast);
            for (const PoolArgs &a : cases) {
                for (const at::Tensor &x : {nchw, cl}) {
                    // The right padding cuts a window where the last one ends before the input.
                    const at::Tensor out = at::max_pool2d(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
                    bool cut = false;
                    for (int i = 0; i < 2; ++i) {
                        const auto at_dim = [&](const std::vector<int64_t> &v, int64_t fallback) {
                            return v.empty() ? fallback : v[v.size() == 1 ? 0 : i];
                        };
                        const int64_t k = at_dim(a.kernel, 0), s = at_dim(a.stride, k), p = at_dim(a.padding, 0),
                                      d = at_dim(a.dilation, 1);
                        cut |= (out.size(2 + i) - 1) * s + d * (k - 1) + 1 - x.size(2 + i) - p < 0;
                    }
                    const PoolPath want = expected_path(x, cut);
                    ++counts[static_cast<int>(want)];
                    expect_same_as_aten(x, a, want);
                }
            }
        }
    }
    // oneDNN (AVX-512) or the own kernel (elsewhere) takes most of the cases.
    const int taken = counts[static_cast<int>(PoolPath::onednn)] + counts[static_cast<int>(PoolPath::own)];
    EXPECT_GT(taken, isa::avx512() ? 3 * counts[static_cast<int>(PoolPath::aten)] : 0);
}

// Windows holding NaN: the own kernel's maximum is NaN, as aten's is, wherever a NaN falls in the
// window (first, last, among equal values); -0 and +0 keep aten's first-wins order.
TEST(MaxPool2d, OwnKernelKeepsNanAndSignedZeros) {
    at::manual_seed(2);
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        at::Tensor x = at::randn({2, 19, 9, 11});
        x.index_put_({0, 3, 0, 0}, std::numeric_limits<float>::quiet_NaN());
        x.index_put_({1, 18, 8, 10}, std::numeric_limits<float>::quiet_NaN());
        x.index_put_({0, 5, 4}, 0.0f);
        x.index_put_({0, 5, 4, 5}, -0.0f);
        x.index_put_({1, 0}, -std::numeric_limits<float>::infinity());
        const at::Tensor cl = x.to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
        for (const PoolArgs &a : {PoolArgs{{3}, {2}, {1}, {1}, true}, PoolArgs{{2}, {1}, {0}, {2}, false}}) {
            const at::Tensor want = at::max_pool2d(cl, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
            const at::Tensor got = max_pool2d_own_kernel(cl, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
            ASSERT_GT(want.isnan().sum().item<int64_t>(), 0) << describe(cl, a);
            EXPECT_TRUE(at::equal(got.isnan(), want.isnan())) << describe(cl, a);
            EXPECT_TRUE(at::equal(at::nan_to_num(got), at::nan_to_num(want))) << describe(cl, a);
            // (a NaN's own sign bit aside: aten's bf16 path may turn it.)
            EXPECT_TRUE(at::equal(at::signbit(at::nan_to_num(got)), at::signbit(at::nan_to_num(want))))
                << describe(cl, a);
        }
    }
    const at::Tensor nchw = at::randn({1, 4, 8, 8});
    EXPECT_THROW(max_pool2d_own_kernel(nchw, {3}, {2}, {1}, {1}, false), c10::Error);
}

TEST(MaxPool2d, TakesOneDnnForTheUsualLayers) {
    if (!isa::avx512()) GTEST_SKIP() << "oneDNN pools only on AVX-512 CPUs (its AVX2 kernels are slower than aten's)";
    const at::Tensor x = at::randn({2, 8, 16, 16});
    EXPECT_EQ(max_pool2d_path(x, {3}, {2}, {1}, {1}, false), PoolPath::onednn);
    EXPECT_EQ(max_pool2d_path(x.contiguous(at::MemoryFormat::ChannelsLast), {3, 3}, {2, 2}, {0, 0}, {1, 1}, true),
              PoolPath::onednn);
    EXPECT_EQ(max_pool2d_path(x, {2}, {}, {0}, {1}, false), PoolPath::onednn);
}

TEST(MaxPool2d, OtherInputsRunAten) {
    at::manual_seed(1);
    const PoolArgs a{{3}, {2}, {1}, {1}, false};
    // strided view, 3-D input, fp64, int, empty batch
    expect_same_as_aten(at::randn({2, 4, 20, 18}).transpose(2, 3), a, PoolPath::aten);
    expect_same_as_aten(at::randn({4, 13, 11}), a, PoolPath::aten);
    expect_same_as_aten(at::randn({2, 4, 13, 11}, at::kDouble), a, PoolPath::aten);
    // aten has no integer max_pool2d: the same error.
    const at::Tensor ints = at::randint(-50, 50, {2, 4, 9, 9}, at::kInt);
    EXPECT_EQ(max_pool2d_path(ints, a.kernel, a.stride, a.padding, a.dilation, false), PoolPath::aten);
    EXPECT_THROW(ops::max_pool2d(ints, a.kernel, a.stride, a.padding, a.dilation, false), c10::Error);
    const at::Tensor empty = at::randn({0, 4, 9, 9});
    EXPECT_EQ(ops::max_pool2d(empty, a.kernel, a.stride, a.padding, a.dilation, false).sizes(),
              at::max_pool2d(empty, a.kernel, a.stride, a.padding, a.dilation, false).sizes());
    // Negative right padding: 13 rows, kernel 2 stride 2, no ceil: the last row is dropped.
    expect_same_as_aten(at::randn({1, 4, 13, 13}), PoolArgs{{2}, {2}, {0}, {1}, false}, PoolPath::aten);
}

TEST(MaxPool2d, BadArgumentsAreAtensErrors) {
    const at::Tensor x = at::randn({1, 2, 8, 8});
    EXPECT_THROW(ops::max_pool2d(x, {3}, {2}, {2}, {1}, false), c10::Error);  // padding above half the kernel
    EXPECT_THROW(ops::max_pool2d(x, {0}, {1}, {0}, {1}, false), c10::Error);
    EXPECT_THROW(ops::max_pool2d(x, {3, 3, 3}, {1}, {0}, {1}, false), c10::Error);
    EXPECT_THROW(ops::max_pool2d(x, {9}, {1}, {0}, {1}, false), c10::Error);  // window larger than the input
}

// -inf and equal values in a window: the maximum is the same as aten's.
TEST(MaxPool2d, InfinitiesAndTies) {
    at::Tensor x = at::full({1, 3, 6, 6}, -std::numeric_limits<float>::infinity());
    x.index_put_({0, 1}, 2.0f);
    x.index_put_({0, 2, 3, 3}, std::numeric_limits<float>::infinity());
    x.index_put_({0, 0, 0, 5}, std::numeric_limits<float>::lowest());  // a real lowest value too
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor in = x.to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
        expect_same_as_aten(in, PoolArgs{{3}, {2}, {1}, {1}, true}, expected_path(in, false));
        expect_same_as_aten(in.contiguous(), PoolArgs{{2}, {2}, {0}, {1}, false}, expected_path(in.contiguous(), false));
    }
}

// max_pool2d_into writes the pooling of a part of a batch into its slice of the whole output
// (the rest untouched), aten's values whatever the path, a -inf window included; its output
// sizes; what it cannot write into is an error, and an NCHW input has no sizes to offer.
TEST(MaxPool2d, IntoASliceOfTheBatch) {
    at::manual_seed(7);
    const PoolArgs a{{3}, {2}, {1}, {1}, true};
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        at::Tensor x = at::randn({5, 6, 9, 11}).to(dtype);
        x.index_put_({3}, -std::numeric_limits<float>::infinity());  // every window of image 3: -inf
        x = x.contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor want = at::max_pool2d(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
        const auto sizes = max_pool2d_sizes(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
        ASSERT_TRUE(sizes);
        EXPECT_EQ(at::IntArrayRef(*sizes), want.sizes());
        const at::Tensor out = at::full(want.sizes(), 7.0, x.options()).contiguous(at::MemoryFormat::ChannelsLast);
        max_pool2d_into(x.narrow(0, 2, 2), a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode, out.narrow(0, 2, 2));
        EXPECT_TRUE(at::equal(out.narrow(0, 2, 2), want.narrow(0, 2, 2))) << dtype;
        EXPECT_TRUE(at::equal(out.narrow(0, 0, 2), at::full_like(out.narrow(0, 0, 2), 7.0))) << dtype;
        EXPECT_TRUE(at::equal(out.narrow(0, 4, 1), at::full_like(out.narrow(0, 4, 1), 7.0))) << dtype;
        EXPECT_THROW(max_pool2d_into(x.narrow(0, 2, 2), a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode,
                                     out.narrow(0, 2, 3)),
                     c10::Error);
        EXPECT_THROW(max_pool2d_into(x.narrow(0, 2, 2), a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode,
                                     out.narrow(0, 2, 2).contiguous()),
                     c10::Error);
        EXPECT_FALSE(max_pool2d_sizes(x.contiguous(), a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode));
        EXPECT_FALSE(max_pool2d_sizes(x, {3}, {2}, {2}, {1}, false));  // padding above half the kernel
    }
}

TEST(SpatialMean, MatchesTheFp64Reference) {
    at::manual_seed(3);
    const std::vector<std::vector<int64_t>> shapes = {
        {1, 1, 1, 1}, {2, 3, 5, 7}, {3, 16, 7, 7}, {2, 17, 4, 9}, {1, 64, 56, 56}, {2, 65, 3, 3},
        {1, 130, 11, 13}, {8, 48, 1, 1}, {2, 2048, 7, 7}, {1, 24, 300, 301}, {3, 200, 17, 19}};
    const std::vector<std::vector<int64_t>> dims = {{2, 3}, {-1, -2}, {3, 2}, {-2, 3}};
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const auto &shape : shapes) {
            // an offset per channel, so the means are far from 0 and the sums long
            const at::Tensor offset = at::randn({1, shape[1], 1, 1}) * 4;
            const at::Tensor x = (at::randn(shape) + offset).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
            const at::Tensor x_before = x.clone();
            // fp32: the sums' rounding; bf16: one rounding of the mean (2^-9 relative) on top
            const double rtol = dtype == at::kFloat ? 2e-6 : 1.0 / 256;
            const at::Tensor want_kept = x.to(at::kDouble).mean({2, 3}, true);
            auto check = [&](const at::Tensor &got, const at::Tensor &want, const std::string &what) {
                ASSERT_EQ(got.sizes(), want.sizes()) << what;
                ASSERT_EQ(got.scalar_type(), dtype) << what;
                const at::Tensor err = (got.to(at::kDouble) - want).abs();
                EXPECT_TRUE((err <= want.abs() * rtol + 1e-6).all().item<bool>())
                    << what << ": max error " << err.max().item<double>();
            };
            for (size_t d = 0; d < dims.size(); ++d) {
                for (const bool keepdim : {true, false}) {
                    std::ostringstream what;
                    what << x.sizes() << " " << dtype << " dims " << at::IntArrayRef(dims[d]) << " keepdim " << keepdim;
                    EXPECT_TRUE(spatial_mean_uses_own_kernel(x, dims[d])) << what.str();
                    const at::Tensor want = keepdim ? want_kept : want_kept.flatten(1);
                    check(ops::spatial_mean(x, dims[d], keepdim), want, what.str());
                }
            }
            for (const bool keepdim : {true, false})
                check(ops::spatial_mean_portable(x, keepdim), keepdim ? want_kept : want_kept.flatten(1),
                      "portable build, keepdim " + std::to_string(keepdim));
            EXPECT_TRUE(at::equal(x, x_before)) << "the input changed";
        }
    }
}

TEST(SpatialMean, OtherInputsRunAten) {
    at::manual_seed(4);
    auto same_as_aten = [](const at::Tensor &x, std::vector<int64_t> dim, bool keepdim) {
        EXPECT_FALSE(spatial_mean_uses_own_kernel(x, dim)) << x.sizes();
        const at::Tensor want = at::mean(x, dim, keepdim);
        const at::Tensor got = ops::spatial_mean(x, dim, keepdim);
        EXPECT_EQ(got.sizes(), want.sizes());
        EXPECT_EQ(got.scalar_type(), want.scalar_type());
        EXPECT_TRUE(at::equal(got, want)) << x.sizes();
    };
    const at::Tensor cl = at::randn({2, 6, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast);
    same_as_aten(at::randn({2, 6, 5, 5}), {2, 3}, true);                     // NCHW
    same_as_aten(at::randn({6, 5, 5}), {-1, -2}, true);                      // unbatched
    same_as_aten(at::randn({2, 6, 5, 5}, at::kDouble).contiguous(at::MemoryFormat::ChannelsLast), {2, 3}, false);
    same_as_aten(cl.slice(1, 0, 4), {2, 3}, true);                           // a view of some channels
    same_as_aten(cl, {1, 2}, true);                                          // other dims
    same_as_aten(cl, {2, 3, 1}, false);
    same_as_aten(cl, {3}, true);
    same_as_aten(at::randn({0, 6, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast), {2, 3}, true);
    same_as_aten(at::randn({2, 3, 4, 5, 6}), {2, 3}, true);                  // 5-D: dims 2, 3 are not the last two
    // aten's errors: integer input, a repeated or out-of-range dim
    const at::Tensor ints = at::randint(0, 9, {2, 6, 5, 5}, at::kInt).contiguous(at::MemoryFormat::ChannelsLast);
    EXPECT_FALSE(spatial_mean_uses_own_kernel(ints, {2, 3}));
    EXPECT_THROW(ops::spatial_mean(ints, {2, 3}, true), c10::Error);
    EXPECT_THROW(ops::spatial_mean(cl, {2, 2}, true), c10::Error);
    // the portable build alone takes only what the kernel takes
    EXPECT_THROW(ops::spatial_mean_portable(at::randn({2, 6, 5, 5}), true), c10::Error);
    EXPECT_THROW(ops::spatial_mean_portable(ints, true), c10::Error);
    EXPECT_THROW(ops::spatial_mean(cl, {2, 4}, true), c10::Error);
}

}  // namespace
}  // namespace ipex::ops
