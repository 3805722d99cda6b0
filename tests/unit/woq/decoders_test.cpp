// GPTQ/AWQ decoders on tensors packed by hand in the test, plus their error codes.
// (The importer against the independent Python reference is tests/e2e/test_import.py.)
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "unit/test_errors.h"
#include "checkpoint/decoders.h"

namespace {

using ipex::ExitCode;
using ipex::testing::code_of;
using ipex::woq::SourceLayer;

at::Tensor word(uint32_t bits) { return at::tensor({static_cast<int32_t>(bits)}, at::kInt); }

// One GPTQ layer, 8 input x 8 output channels, one group: q[k][n] = (k + n) % 16.
SourceLayer gptq_layer(bool v2, int zero) {
    SourceLayer s;
    s.name = "l";
    s.qweight = at::zeros({1, 8}, at::kInt);
    for (int n = 0; n < 8; ++n) {
        uint32_t w = 0;
        for (int k = 0; k < 8; ++k) w |= uint32_t((k + n) % 16) << (4 * k);
        s.qweight[0][n] = static_cast<int32_t>(w);
    }
    const uint32_t stored = v2 ? zero : ((zero - 1) & 0xf);
    uint32_t z = 0;
    for (int n = 0; n < 8; ++n) z |= stored << (4 * n);
    s.qzeros = word(z).view({1, 1});
    s.scales = at::full({1, 8}, 0.25, at::kHalf);
    return s;
}

}  // namespace

TEST(Decoders, UnpackInt32FieldsLowBitsFirst) {
    const at::Tensor v = ipex::woq::unpack_int32(word(0x76543210u).view({1, 1}), 4, 1);
    EXPECT_TRUE(at::equal(v, at::arange(8, at::kLong).view({1, 8})));
    const at::Tensor b = ipex::woq::unpack_int32(word(0xff800102u).view({1, 1}), 8, 0);
    EXPECT_TRUE(at::equal(b, at::tensor({2, 1, 0x80, 0xff}, at::kLong).view({4, 1})));
}

TEST(Decoders, GptqV1AndV2ZeroConventions) {
    ipex::woq::DecodeSettings s;
    s.group_size = -1;
    for (const bool v2 : {false, true})
        for (const int zero : {0, 8, 15}) {
            s.gptq_v2 = v2;
            const auto layer = ipex::woq::decode_gptq(gptq_layer(v2, zero), s);
            const at::Tensor w = ipex::woq::dequantize(layer);
            EXPECT_EQ(w[3][5].item<float>(), ((5 + 3) % 16 - zero) * 0.25f) << "v2=" << v2 << " zero=" << zero;
        }
}

TEST(Decoders, AwqNibbleOrder) {
    // Nibble i of a word holds output channel order_map[i], order_map = 0,2,4,6,1,3,5,7.
    SourceLayer s;
    s.name = "l";
    const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    uint32_t w = 0;
    for (int i = 0; i < 8; ++i) w |= uint32_t(order_map[i] + 1) << (4 * i);  // q of channel c = c + 1
    s.qweight = word(w).view({1, 1}).repeat({32, 1});
    s.qzeros = word(0).view({1, 1});
    s.scales = at::ones({1, 8}, at::kHalf);
    ipex::woq::DecodeSettings settings;
    const auto layer = ipex::woq::decode_awq(s, settings);
    EXPECT_EQ(layer.in_features, 32);
    EXPECT_EQ(layer.out_features, 8);
    EXPECT_TRUE(at::equal(ipex::woq::dequantize(layer).select(1, 0), at::arange(1, 9, at::kFloat)));
}

TEST(Decoders, ShapeMismatchesAreBadInputAndUnsupportedIsUnsupported) {
    ipex::woq::DecodeSettings s;
    s.group_size = -1;
    SourceLayer bad_scales = gptq_layer(false, 8);
    bad_scales.scales = at::ones({1, 7}, at::kHalf);
    EXPECT_EQ(code_of([&] { ipex::woq::decode_gptq(bad_scales, s); }), ExitCode::bad_input);
    SourceLayer bad_zeros = gptq_layer(false, 8);
    bad_zeros.qzeros = at::zeros({2, 1}, at::kInt);
    EXPECT_EQ(code_of([&] { ipex::woq::decode_gptq(bad_zeros, s); }), ExitCode::bad_input);
    SourceLayer bad_gidx = gptq_layer(false, 8);
    bad_gidx.g_idx = at::full({8}, 3, at::kInt);
    EXPECT_EQ(code_of([&] { ipex::woq::decode_gptq(bad_gidx, s); }), ExitCode::bad_input);
    ipex::woq::DecodeSettings three = s;
    three.bits = 3;
    EXPECT_EQ(code_of([&] { ipex::woq::decode_gptq(gptq_layer(false, 8), three); }), ExitCode::unsupported);
    ipex::woq::DecodeSettings g3 = s;
    g3.group_size = 3;  // does not divide 8 input channels
    EXPECT_EQ(code_of([&] { ipex::woq::decode_gptq(gptq_layer(false, 8), g3); }), ExitCode::unsupported);
}
