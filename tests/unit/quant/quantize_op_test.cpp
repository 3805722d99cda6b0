// ipex::quantize_per_tensor against aten::quantize_per_tensor (the reference, value by value,
// bit-exact) over layouts, tails, both dtypes, zero points, ties and clamped values; and
// ipex::dequantize against aten::dequantize (bit-exact, the input's strides kept).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

at::Tensor ipex_quantize(const at::Tensor &x, double scale, int64_t zp, at::ScalarType dtype) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::quantize_per_tensor", "")
                               .typed<at::Tensor(const at::Tensor &, double, int64_t, at::ScalarType)>();
    return op.call(x, scale, zp, dtype);
}

at::Tensor ints_of(const at::Tensor &q) { return q.int_repr().to(at::kInt).contiguous(); }

void expect_same(const at::Tensor &x, double scale, int64_t zp, at::ScalarType dtype, const std::string &what) {
    const at::Tensor got = ipex_quantize(x, scale, zp, dtype);
    const at::Tensor want = at::quantize_per_tensor(x.contiguous(), scale, zp, dtype);
    ASSERT_EQ(got.scalar_type(), dtype) << what;
    EXPECT_EQ(got.q_scale(), scale) << what;
    EXPECT_EQ(got.q_zero_point(), zp) << what;
    ASSERT_EQ(got.sizes(), x.sizes()) << what;
    if (x.dim() == 4) EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
    const at::Tensor diff = (ints_of(got) - ints_of(want)).abs();
    EXPECT_EQ(diff.max().item<int>(), 0) << what << ": " << diff.nonzero().size(0) << " values differ";
}

TEST(QuantizeOp, MatchesAtenOverShapesLayoutsAndTypes) {
    at::manual_seed(3);
    const std::vector<std::vector<int64_t>> shapes = {{1}, {15}, {16}, {17}, {1000}, {3, 77}, {2, 5, 9},
                                                      {2, 3, 7, 5}, {16, 3, 24, 24}, {1, 17, 3, 3},
                                                      {2, 64, 9, 11}, {3, 1, 5, 5}, {2, 4, 1, 1}};
    for (const auto &shape : shapes)
        for (at::ScalarType dtype : {at::kQUInt8, at::kQInt8})
            for (int64_t zp : dtype == at::kQUInt8 ? std::vector<int64_t>{0, 128, 3} : std::vector<int64_t>{0, -5, 100}) {
                const at::Tensor x = at::randn(shape) * 3;
                const std::string what = "shape " + c10::str(at::IntArrayRef(shape)) + " " +
                                         c10::toString(dtype) + " zp " + std::to_string(zp);
                expect_same(x, 0.0371, zp, dtype, what);
                if (shape.size() == 4) {
                    expect_same(x.contiguous(at::MemoryFormat::ChannelsLast), 0.02, zp, dtype, what + " channels-last");
                    expect_same(x.transpose(2, 3), 0.05, zp, dtype, what + " transposed");
                }
                if (shape.size() == 2) expect_same(x.t(), 0.05, zp, dtype, what + " transposed");
            }
}

// Exact ties (k + 0.5 steps) round half to even as nearbyint; values past the range clamp.
TEST(QuantizeOp, TiesAndClampedValues) {
    const double scale = 0.25;  // exact in binary: x / scale is exact
    std::vector<float> v;
    for (int k = -300; k <= 300; ++k) v.push_back(static_cast<float>((k + 0.5) * scale));
    for (float big : {1e3f, -1e3f, 1e6f, -1e6f, 3e9f, -3e9f}) v.push_back(big);
    const at::Tensor x = at::tensor(v);
    for (at::ScalarType dtype : {at::kQUInt8, at::kQInt8})
        for (int64_t zp : {0, 7, -7}) {
            if (dtype == at::kQUInt8 && zp < 0) continue;
            expect_same(x.narrow(0, 0, 601), scale, zp, dtype, std::string("ties ") + c10::toString(dtype));
            const at::Tensor got = ints_of(ipex_quantize(x, scale, zp, dtype));
            const int lo = dtype == at::kQUInt8 ? 0 : -128, hi = dtype == at::kQUInt8 ? 255 : 127;
            for (int64_t i = 601; i < x.numel(); ++i)
                EXPECT_EQ(got[i].item<int>(), v[i] > 0 ? hi : lo) << v[i];
        }
    // NaN and infinities: NaN to the lowest value, +-inf to the bounds.
    const float inf = std::numeric_limits<float>::infinity();
    const at::Tensor special = ints_of(ipex_quantize(at::tensor({std::nanf(""), inf, -inf}), 0.1, 0, at::kQInt8));
    EXPECT_EQ(special[0].item<int>(), -128);
    EXPECT_EQ(special[1].item<int>(), 127);
    EXPECT_EQ(special[2].item<int>(), -128);
}

TEST(QuantizeOp, RejectsBadArguments) {
    const at::Tensor x = at::randn({4, 4});
    EXPECT_THROW(ipex_quantize(x, 0.1, 0, at::kFloat), c10::Error);
    EXPECT_THROW(ipex_quantize(x, 0.0, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(ipex_quantize(x, -1.0, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(ipex_quantize(x, std::numeric_limits<double>::infinity(), 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(ipex_quantize(x, 1e-300, 0, at::kQUInt8), c10::Error);  // 1 / scale not finite in fp32
    EXPECT_THROW(ipex_quantize(x, 0.1, 256, at::kQUInt8), c10::Error);
    EXPECT_THROW(ipex_quantize(x, 0.1, -1, at::kQUInt8), c10::Error);
    EXPECT_THROW(ipex_quantize(x, 0.1, 128, at::kQInt8), c10::Error);
    EXPECT_THROW(ipex_quantize(at::quantize_per_tensor(x, 0.1, 0, at::kQUInt8), 0.1, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(ipex_quantize(at::ones({3}, at::kInt), 0.1, 0, at::kQUInt8), c10::Error);
}

at::Tensor ipex_dequantize(const at::Tensor &q) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::dequantize", "")
                               .typed<at::Tensor(const at::Tensor &)>();
    return op.call(q);
}

void expect_dequantized(const at::Tensor &q, const std::string &what) {
    const at::Tensor got = ipex_dequantize(q);
    const at::Tensor want = q.dequantize();
    ASSERT_EQ(got.scalar_type(), at::kFloat) << what;
    ASSERT_EQ(got.sizes(), q.sizes()) << what;
    if (q.is_non_overlapping_and_dense()) EXPECT_EQ(got.strides(), q.strides()) << what;
    EXPECT_TRUE(at::equal(got, want)) << what << ": max difference " << (got - want).abs().max().item<float>();
}

TEST(DequantizeOp, MatchesAtenOverShapesLayoutsAndTypes) {
    at::manual_seed(4);
    const std::vector<std::vector<int64_t>> shapes = {{1}, {15}, {16}, {17}, {63}, {64}, {65}, {1000}, {3, 77},
                                                      {2, 3, 7, 5}, {2, 64, 9, 11}, {3, 1, 5, 5}, {2, 5, 3, 4, 6}};
    for (const auto &shape : shapes)
        for (at::ScalarType dtype : {at::kQUInt8, at::kQInt8})
            for (int64_t zp :
                 dtype == at::kQUInt8 ? std::vector<int64_t>{0, 255, 3} : std::vector<int64_t>{0, -128, 127}) {
                const std::string what = "shape " + c10::str(at::IntArrayRef(shape)) + " " + c10::toString(dtype) +
                                         " zp " + std::to_string(zp);
                // Every byte value: the clamped ends of the range included.
                const at::Tensor q = at::quantize_per_tensor(at::randn(shape) * 20, 0.1234567, zp, dtype);
                expect_dequantized(q, what);
                if (shape.size() == 4) {
                    expect_dequantized(q.contiguous(at::MemoryFormat::ChannelsLast), what + " channels-last");
                    expect_dequantized(q.transpose(1, 3), what + " transposed");
                    expect_dequantized(q.narrow(3, 1, shape[3] - 1), what + " a slice (not dense)");
                }
                if (shape.size() == 2) expect_dequantized(q.t(), what + " transposed");
            }
}

// An NWC view (an int8 1-D convolution's output) stays NWC; what it does not compute itself
// (per-channel, qint32, float inputs) is aten's answer.
TEST(DequantizeOp, KeepsStridesAndHandsTheRestToAten) {
    at::manual_seed(5);
    const at::Tensor nwc = at::quantize_per_tensor(at::randn({2, 9, 5}), 0.05, 7, at::kQUInt8).transpose(1, 2);
    const at::Tensor got = ipex_dequantize(nwc);
    EXPECT_EQ(got.strides(), nwc.strides());
    EXPECT_TRUE(at::equal(got, nwc.dequantize()));
    const at::Tensor per_channel = at::quantize_per_channel(at::randn({4, 6}), at::rand({4}) + 0.1,
                                                            at::zeros({4}, at::kLong), 0, at::kQInt8);
    EXPECT_TRUE(at::equal(ipex_dequantize(per_channel), per_channel.dequantize()));
    const at::Tensor q32 = at::quantize_per_tensor(at::randn({5, 3}), 0.01, 2, at::kQInt32);
    EXPECT_TRUE(at::equal(ipex_dequantize(q32), q32.dequantize()));
    const at::Tensor f = at::randn({3, 4});
    EXPECT_TRUE(at::equal(ipex_dequantize(f), f));
}

}  // namespace
