// ipex::max_pool2d against aten::max_pool2d (a max is exact, so the results must be equal)
// over odd sizes, kernels, strides, padding, dilation and ceil mode, NCHW and channels-last
// inputs in fp32 and bf16; the output keeps aten's layout; what oneDNN is not given
// (strided views, other ranks and dtypes, bad arguments) runs aten, errors included.
// ipex::spatial_mean against an fp64 mean over odd channel counts (vector tails), pixel counts
// across the kernel's chunks, batch 1 and more, every spelling of the two spatial dims, with
// and without keepdim; what the kernel does not take runs aten::mean, errors included.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/isa.h"
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

void expect_same_as_aten(const at::Tensor &x, const PoolArgs &a, bool want_onednn) {
    const std::string what = describe(x, a);
    EXPECT_EQ(max_pool2d_uses_onednn(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode), want_onednn) << what;
    const at::Tensor want = at::max_pool2d(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
    const at::Tensor got = ops::max_pool2d(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    EXPECT_EQ(got.scalar_type(), x.scalar_type()) << what;
    EXPECT_TRUE(at::equal(got, want)) << what << "\ngot " << got << "\nwant " << want;
    if (x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous())
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
    else if (x.is_contiguous())
        EXPECT_TRUE(got.is_contiguous()) << what;
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
    int on_onednn = 0, on_aten = 0;
    // oneDNN pools only on AVX-512 CPUs (bf16 needs it; fp32's AVX2 kernels are slower than
    // aten's): elsewhere every pool runs aten, which is asserted, and the numbers are aten's.
    const bool pools_on_onednn = isa::avx512();
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const std::vector<int64_t> &shape : std::vector<std::vector<int64_t>>{
                 {2, 3, 17, 19}, {1, 16, 8, 8}, {3, 24, 15, 16}, {2, 35, 23, 9}}) {
            const at::Tensor nchw = at::randn(shape).to(dtype);
            const at::Tensor cl = nchw.contiguous(at::MemoryFormat::ChannelsLast);
            for (const PoolArgs &a : cases) {
                // Every case here but a window the right padding would cut goes to oneDNN.
                for (const at::Tensor &x : {nchw, cl}) {
                    const bool onednn = max_pool2d_uses_onednn(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
                    ++(onednn ? on_onednn : on_aten);
                    if (!pools_on_onednn) EXPECT_FALSE(onednn) << describe(x, a);
                    expect_same_as_aten(x, a, onednn);
                }
            }
        }
    }
    if (pools_on_onednn) EXPECT_GT(on_onednn, 3 * on_aten) << on_onednn << " on oneDNN, " << on_aten << " on aten";
}

TEST(MaxPool2d, TakesOneDnnForTheUsualLayers) {
    if (!isa::avx512()) GTEST_SKIP() << "oneDNN pools only on AVX-512 CPUs (its AVX2 kernels are slower than aten's)";
    const at::Tensor x = at::randn({2, 8, 16, 16});
    EXPECT_TRUE(max_pool2d_uses_onednn(x, {3}, {2}, {1}, {1}, false));
    EXPECT_TRUE(max_pool2d_uses_onednn(x.contiguous(at::MemoryFormat::ChannelsLast), {3, 3}, {2, 2}, {0, 0}, {1, 1}, true));
    EXPECT_TRUE(max_pool2d_uses_onednn(x, {2}, {}, {0}, {1}, false));
}

TEST(MaxPool2d, OtherInputsRunAten) {
    at::manual_seed(1);
    const PoolArgs a{{3}, {2}, {1}, {1}, false};
    // strided view, 3-D input, fp64, int, empty batch
    expect_same_as_aten(at::randn({2, 4, 20, 18}).transpose(2, 3), a, false);
    expect_same_as_aten(at::randn({4, 13, 11}), a, false);
    expect_same_as_aten(at::randn({2, 4, 13, 11}, at::kDouble), a, false);
    // aten has no integer max_pool2d: the same error.
    const at::Tensor ints = at::randint(-50, 50, {2, 4, 9, 9}, at::kInt);
    EXPECT_FALSE(max_pool2d_uses_onednn(ints, a.kernel, a.stride, a.padding, a.dilation, false));
    EXPECT_THROW(ops::max_pool2d(ints, a.kernel, a.stride, a.padding, a.dilation, false), c10::Error);
    const at::Tensor empty = at::randn({0, 4, 9, 9});
    EXPECT_EQ(ops::max_pool2d(empty, a.kernel, a.stride, a.padding, a.dilation, false).sizes(),
              at::max_pool2d(empty, a.kernel, a.stride, a.padding, a.dilation, false).sizes());
    // Negative right padding: 13 rows, kernel 2 stride 2, no ceil: the last row is dropped.
    expect_same_as_aten(at::randn({1, 4, 13, 13}), PoolArgs{{2}, {2}, {0}, {1}, false}, false);
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
        const bool onednn = isa::avx512();  // oneDNN's pooling there, aten's elsewhere
        expect_same_as_aten(in, PoolArgs{{3}, {2}, {1}, {1}, true}, onednn);
        expect_same_as_aten(in.contiguous(), PoolArgs{{2}, {2}, {0}, {1}, false}, onednn);
    }
}

TEST(SpatialMean, MatchesTheFp64Reference) {
    at::manual_seed(3);
    const std::vector<std::vector<int64_t>> shapes = {
        {1, 1, 1, 1}, {2, 3, 5, 7}, {3, 16, 7, 7}, {2, 17, 4, 9}, {1, 64, 56, 56}, {2, 65, 3, 3},
        {1, 130, 11, 13}, {8, 48, 1, 1}, {2, 2048, 7, 7}, {1, 24, 300, 301}};
    const std::vector<std::vector<int64_t>> dims = {{2, 3}, {-1, -2}, {3, 2}, {-2, 3}};
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        const bool own = own_kernels::available(dtype == at::kBFloat16);
        for (const auto &shape : shapes) {
            // an offset per channel, so the means are far from 0 and the sums long
            const at::Tensor offset = at::randn({1, shape[1], 1, 1}) * 4;
            const at::Tensor x = (at::randn(shape) + offset).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
            for (size_t d = 0; d < dims.size(); ++d) {
                for (const bool keepdim : {true, false}) {
                    std::ostringstream what;
                    what << x.sizes() << " " << dtype << " dims " << at::IntArrayRef(dims[d]) << " keepdim " << keepdim;
                    EXPECT_EQ(spatial_mean_uses_own_kernel(x, dims[d]), own) << what.str();
                    const at::Tensor got = ops::spatial_mean(x, dims[d], keepdim);
                    const at::Tensor want = x.to(at::kDouble).mean({2, 3}, keepdim);
                    ASSERT_EQ(got.sizes(), want.sizes()) << what.str();
                    ASSERT_EQ(got.scalar_type(), dtype) << what.str();
                    // fp32: the sums' rounding; bf16: one rounding of the mean (2^-9 relative) on
                    // top; aten's bf16 mean (no AVX-512-BF16 kernel here) sums in bf16 steps, so
                    // only its agreement with aten below is checked.
                    const double rtol = dtype == at::kFloat ? 2e-6 : 1.0 / 256;
                    const bool exact_sums = own || dtype == at::kFloat;
                    const at::Tensor err = (got.to(at::kDouble) - want).abs();
                    const at::Tensor bound = want.abs() * rtol + 1e-6;
                    if (exact_sums)
                        EXPECT_TRUE((err <= bound).all().item<bool>())
                            << what.str() << ": max error " << err.max().item<double>();
                    // and aten's own mean of the same input to within one rounding step
                    const at::Tensor aten = x.mean(dims[d], keepdim);
                    EXPECT_LE((got.to(at::kDouble) - aten.to(at::kDouble)).abs().max().item<double>(),
                              (aten.to(at::kDouble).abs() * rtol * 2 + 1e-6).max().item<double>())
                        << what.str();
                }
            }
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
    EXPECT_THROW(ops::spatial_mean(cl, {2, 4}, true), c10::Error);
}

}  // namespace
}  // namespace ipex::ops
