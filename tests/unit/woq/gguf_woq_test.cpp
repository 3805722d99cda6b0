// GGUF blocks held as weight-only layers (checkpoint/gguf_woq.h): the layer dequantizes to the
// values the GGUF dequantizer gives, bit for bit for q4_0 and q8_0 and within the stated bound for
// q4_1, on random blocks (random fp16 scales of both signs), with and without a row order.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "checkpoint/gguf.h"
#include "checkpoint/gguf_woq.h"

namespace ipex::woq {
namespace {

constexpr int64_t kRows = 12, kCols = 160;  // 5 blocks a row

// rows x cols of `type` as random blocks whose fp16 fields (d, and m for q4_1) are finite.
std::vector<uint8_t> random_tensor(GgmlType type, uint32_t seed) {
    uint64_t elements = 0, bytes = 0;
    ggml_type_layout(static_cast<uint32_t>(type), elements, bytes);
    std::mt19937 rng(seed);
    std::vector<uint8_t> b(static_cast<size_t>(kRows * kCols / 32 * bytes));
    for (auto &x : b) x = static_cast<uint8_t>(rng());
    const int halves = type == GgmlType::q4_1 ? 2 : 1;
    for (size_t at = 0; at < b.size(); at += bytes)
        for (int h = 0; h < halves; ++h) b[at + 2 * h + 1] &= 0xbb;  // exponent below 0x1e, either sign
    return b;
}

at::Tensor ggml_values(GgmlType type, const std::vector<uint8_t> &b) {
    at::Tensor out = at::empty({kRows, kCols}, at::kFloat);
    dequantize_ggml(static_cast<uint32_t>(type), b.data(), static_cast<uint64_t>(kRows * kCols), out.data_ptr<float>());
    return out;
}

at::Tensor layer_values(GgmlType type, const std::vector<uint8_t> &b, const std::vector<int64_t> *order = nullptr) {
    const auto layer = ggml_to_woq("x", static_cast<uint32_t>(type), b.data(), kRows, kCols, order);
    EXPECT_TRUE(layer.has_value());
    EXPECT_EQ(layer->group_size, 32);
    EXPECT_EQ(layer->bits, type == GgmlType::q8_0 ? 8 : 4);
    return dequantize(*layer);
}

bool same_bits(const at::Tensor &a, const at::Tensor &b) {
    return a.sizes() == b.sizes() && std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(a.nbytes())) == 0;
}

TEST(GgufWoq, Q4_0AndQ8_0AreBitExact) {
    for (GgmlType type : {GgmlType::q4_0, GgmlType::q8_0})
        for (uint32_t seed = 1; seed <= 4; ++seed) {
            const auto b = random_tensor(type, seed);
            EXPECT_TRUE(same_bits(layer_values(type, b), ggml_values(type, b))) << ggml_type_name(static_cast<uint32_t>(type));
        }
}

// Output row r from file row order[r]: the layer equals the GGUF values' rows gathered the same way.
TEST(GgufWoq, RowOrderPermutesQweightScalesAndZeros) {
    std::vector<int64_t> order(kRows);
    for (int64_t r = 0; r < kRows; ++r) order[static_cast<size_t>(r)] = (r * 5 + 3) % kRows;
    const at::Tensor index = at::tensor(order, at::kLong);
    for (GgmlType type : {GgmlType::q4_0, GgmlType::q8_0}) {
        const auto b = random_tensor(type, 9);
        EXPECT_TRUE(same_bits(layer_values(type, b, &order), ggml_values(type, b).index_select(0, index).contiguous()));
    }
}

// q4_1: w = d q + m (fp32: d q exact, one rounding of the sum) held as (q - fl(-m/d)) d: three
// roundings, so |ours - gguf| <= 2^-24 (|m| + 3 |w|) up to second-order terms.
TEST(GgufWoq, Q4_1WithinStatedBound) {
    int64_t differ = 0, total = 0;
    for (uint32_t seed = 1; seed <= 8; ++seed) {
        const auto b = random_tensor(GgmlType::q4_1, seed);
        const at::Tensor ours = layer_values(GgmlType::q4_1, b), ref = ggml_values(GgmlType::q4_1, b);
        const float *o = ours.data_ptr<float>(), *g = ref.data_ptr<float>();
        for (int64_t i = 0; i < ours.numel(); ++i) {
            const uint8_t *block = b.data() + (i / 32) * 20;
            uint16_t mb;
            std::memcpy(&mb, block + 2, 2);
            const double m = static_cast<float>(c10::Half(mb, c10::Half::from_bits()));
            const double bound = std::ldexp(std::fabs(m) + 3 * std::fabs(double(g[i])), -24) * (1 + 1e-6);
            EXPECT_LE(std::fabs(double(o[i]) - g[i]), bound) << "element " << i << " seed " << seed;
            differ += o[i] != g[i];
            ++total;
        }
    }
    RecordProperty("q4_1_elements_not_bit_equal", std::to_string(differ) + " of " + std::to_string(total));
}

// A q4_1 block with d = 0 holds m in every element exactly; a non-finite d or m is not held.
TEST(GgufWoq, Q4_1ZeroScaleExactAndNonFiniteRefused) {
    auto b = random_tensor(GgmlType::q4_1, 3);
    const uint16_t zero = 0, inf = 0x7c00;
    std::memcpy(b.data() + 20 * 2, &zero, 2);  // block 2: d = 0
    const at::Tensor ours = layer_values(GgmlType::q4_1, b), ref = ggml_values(GgmlType::q4_1, b);
    EXPECT_TRUE(at::equal(ours.flatten().slice(0, 64, 96), ref.flatten().slice(0, 64, 96)));
    std::memcpy(b.data() + 20 * 3, &inf, 2);
    EXPECT_FALSE(ggml_to_woq("x", static_cast<uint32_t>(GgmlType::q4_1), b.data(), kRows, kCols).has_value());
}

}  // namespace
}  // namespace ipex::woq
