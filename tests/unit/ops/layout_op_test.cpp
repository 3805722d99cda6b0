// ipex::contiguous against aten::contiguous: bit-equal over 3-, 4- and 5-D channels-last tensors
// of 4- and 2-byte elements (fp32, int32, bf16, fp16), channel counts below, at and around the
// 8x8 blocks, pixel counts with tails, one image and several; the transpose is taken exactly for
// those, and everything else (contiguous already: the same tensor; other layouts, slices, other
// dtypes, empty tensors) is aten's result. to_channels_last of a three-channel NCHW fp32 batch
// (the own kernel where the CPU runs it) against aten's cast and copy, fp32 and bf16.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>
#include <string>
#include <vector>

#include "ops/layout_op.h"
#include "ops/onednn_utils.h"

namespace ipex::ops {
namespace {

// Values that tell every element apart, whatever the dtype (bf16 and fp16 hold integers below
// 256 exactly, so a permutation of elements shows).
at::Tensor distinct(const std::vector<int64_t> &sizes, at::ScalarType type) {
    const at::Tensor base = at::arange(static_cast<double>(c10::multiply_integers(sizes)), at::kDouble);
    const at::Tensor values = at::isFloatingType(type) && c10::elementSize(type) == 2 ? at::fmod(base, 251.0) : base;
    return values.view(sizes).to(type);
}

at::Tensor channels_last(const at::Tensor &t) {
    if (t.dim() == 4) return t.contiguous(at::MemoryFormat::ChannelsLast);
    if (t.dim() == 5) return t.contiguous(at::MemoryFormat::ChannelsLast3d);
    return t.transpose(1, 2).contiguous().transpose(1, 2);  // NWC
}

std::string describe(const at::Tensor &t) {
    std::ostringstream out;
    out << t.sizes() << " " << t.scalar_type() << " strides " << t.strides();
    return out.str();
}

TEST(IpexContiguous, TransposesChannelsLastBitForBit) {
    const std::vector<std::vector<int64_t>> shapes{
        {2, 8, 8, 8},    {1, 21, 13, 17}, {3, 3, 5, 7},   {2, 64, 9, 10}, {1, 2, 3, 3},  {2, 17, 1, 9},
        {1, 256, 8, 9},  {4, 9, 16, 8},   {2, 7, 33},     {1, 40, 65},    {2, 5, 3, 4, 6}, {1, 16, 2, 8, 8},
    };
    int transposed = 0;
    for (const auto &sizes : shapes)
        for (const at::ScalarType type : {at::kFloat, at::kInt, at::kBFloat16, at::kHalf}) {
            const at::Tensor x = channels_last(distinct(sizes, type));
            const at::Tensor before = x.clone();
            ASSERT_FALSE(x.is_contiguous()) << describe(x);
            EXPECT_TRUE(contiguous_transposes(x)) << describe(x);
            const at::Tensor got = contiguous(x);
            EXPECT_TRUE(got.is_contiguous()) << describe(x);
            EXPECT_EQ(got.scalar_type(), type);
            EXPECT_TRUE(got.equal(x.contiguous())) << describe(x);
            EXPECT_TRUE(x.equal(before) && x.strides() == before.strides()) << "input changed: " << describe(x);
            transposed += contiguous_transposes(x);
        }
    EXPECT_EQ(transposed, 48);
}

// A larger tensor, so that several threads' tasks each take part of every image.
TEST(IpexContiguous, LargeTensorAcrossTasks) {
    const at::Tensor x = at::randn({3, 96, 37, 41}).contiguous(at::MemoryFormat::ChannelsLast);
    EXPECT_TRUE(contiguous(x).equal(x.contiguous()));
    const at::Tensor b = x.to(at::kBFloat16);
    EXPECT_TRUE(contiguous(b).equal(b.contiguous()));
}

TEST(IpexContiguous, EverythingElseIsAtens) {
    // Already contiguous: the tensor itself, as aten returns it.
    const at::Tensor plain = at::randn({2, 3, 4, 5});
    EXPECT_FALSE(contiguous_transposes(plain));
    EXPECT_TRUE(contiguous(plain).is_same(plain));
    std::vector<at::Tensor> others{
        at::randn({2, 6, 4, 5}, at::kDouble).contiguous(at::MemoryFormat::ChannelsLast),  // 8-byte elements
        at::randint(0, 100, {2, 6, 4, 5}, at::kByte).contiguous(at::MemoryFormat::ChannelsLast),  // 1-byte
        at::randn({2, 6, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast).narrow(1, 1, 3),  // a channel slice
        at::randn({2, 6, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast).narrow(2, 0, 2),  // a row slice
        at::randn({2, 6, 4, 5}).permute({0, 1, 3, 2}),                                     // another permutation
        at::randn({6, 10}).t(),                                                               // 2-D
        at::randn({2, 3, 4, 5, 6, 7}).transpose(1, 5),                                        // 6-D
    };
    for (const at::Tensor &x : others) {
        EXPECT_FALSE(contiguous_transposes(x)) << describe(x);
        const at::Tensor got = contiguous(x);
        EXPECT_TRUE(got.is_contiguous()) << describe(x);
        EXPECT_TRUE(got.equal(x.contiguous())) << describe(x);
    }
    const at::Tensor empty = at::empty({0, 4, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast);
    EXPECT_EQ(contiguous(empty).sizes(), empty.sizes());
}

// The registered op, as a graph calls it.
TEST(IpexContiguous, RegisteredOp) {
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("ipex::contiguous", "");
    const at::Tensor x = at::randn({2, 24, 5, 6}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor got = op.typed<at::Tensor(const at::Tensor &)>().call(x);
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_TRUE(got.equal(x.contiguous()));
}

// contiguous_for_view: the tensor itself where the view works on its strides, else the
// standard-layout copy; the view's values are the original's either way.
TEST(IpexContiguousForView, CopiesOnlyWhenTheViewNeedsIt) {
    const at::Tensor x = at::randn({2, 8, 5, 6}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor plain = x.contiguous();
    // The channels split (a detector head's): a view of the channels-last tensor itself.
    const at::Tensor split = contiguous_for_view(x, {2, 2, 4, 5, 6});
    EXPECT_EQ(split.data_ptr(), x.data_ptr());
    EXPECT_TRUE(split.view({2, 2, 4, 5, 6}).equal(plain.view({2, 2, 4, 5, 6})));
    EXPECT_TRUE(contiguous_for_view(x, {2, -1, 4, 5, 6}).data_ptr() == x.data_ptr());
    // Channels merged with pixels: a copy in the standard layout.
    const at::Tensor flat = contiguous_for_view(x, {2, -1});
    EXPECT_NE(flat.data_ptr(), x.data_ptr());
    EXPECT_TRUE(flat.is_contiguous());
    EXPECT_TRUE(flat.view({2, -1}).equal(plain.view({2, -1})));
    // A size no view takes: the tensor as it is, for the view to refuse as it would have.
    EXPECT_EQ(contiguous_for_view(x, {7, -1}).data_ptr(), x.data_ptr());
    EXPECT_THROW(x.view({7, -1}), std::exception);
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("ipex::contiguous_for_view", "");
    const at::Tensor got = op.typed<at::Tensor(const at::Tensor &, at::IntArrayRef)>().call(x, {2, -1});
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_TRUE(got.equal(plain));
}

// Pixel counts of one block, of several with a tail, of a 224x224 image, and 3 images of 625
// blocks (2 threads split them inside an image); values over a wide
// range with signed zeros and infinities (no subnormals: VCVTNEPS2BF16 reads them as zero),
// bit-equal to aten's values; a NaN stays a NaN.
TEST(ToChannelsLast, ThreePlanesMatchAten) {
    at::manual_seed(3);
    const std::vector<std::vector<int64_t>> shapes = {{1, 3, 1, 1}, {1, 3, 4, 4}, {2, 3, 5, 7}, {3, 3, 17, 1},
                                                      {2, 3, 224, 224}, {3, 3, 100, 100}};
    for (const auto &sizes : shapes) {
        at::Tensor x = at::randn(sizes) * at::exp(at::randn(sizes) * 8);
        x.view(-1)[0] = -0.f;
        if (x.numel() > 3) {
            x.view(-1)[1] = INFINITY;
            x.view(-1)[2] = -INFINITY;
            x.view(-1)[x.numel() - 1] = NAN;
        }
        for (const auto type : {at::kFloat, at::kBFloat16}) {
            std::ostringstream what;
            what << at::IntArrayRef(sizes) << " " << type;
            const at::Tensor got = to_channels_last(x, type);
            const at::Tensor want = x.to(type).contiguous(at::MemoryFormat::ChannelsLast);
            ASSERT_EQ(got.sizes(), want.sizes()) << what.str();
            EXPECT_EQ(got.scalar_type(), type) << what.str();
            EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what.str();
            EXPECT_TRUE(at::equal(got.isnan(), want.isnan())) << what.str();
            const at::Tensor numbers = want.isnan().logical_not();
            EXPECT_TRUE(at::equal(got.masked_select(numbers), want.masked_select(numbers))) << what.str();
            EXPECT_TRUE(at::equal(got.masked_select(numbers).signbit(), want.masked_select(numbers).signbit()))
                << what.str();
        }
    }
}

}  // namespace
}  // namespace ipex::ops
