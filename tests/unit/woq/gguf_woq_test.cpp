// GGUF blocks held as weight-only layers (checkpoint/gguf_woq.h): the layer dequantizes to the
// values the GGUF dequantizer gives, bit for bit for q4_0 and q8_0 and within the stated bound for
// q4_1, q4_K and q5_K, on random blocks (random fp16 scales of both signs; for the K-quants also
// the largest and smallest fp16 scales, zero d, zero dmin, and row counts that are not a multiple
// of the loader's row grain), with and without a row order.
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

// ---- K-quants: 256-element blocks, d and dmin the first two fp16 fields.

constexpr int64_t kKCols = 512;  // two super-blocks a row

std::vector<uint8_t> random_k_tensor(GgmlType type, int64_t rows, uint32_t seed) {
    uint64_t elements = 0, bytes = 0;
    ggml_type_layout(static_cast<uint32_t>(type), elements, bytes);
    std::mt19937 rng(seed);
    std::vector<uint8_t> b(static_cast<size_t>(rows * kKCols / 256 * bytes));
    for (auto &x : b) x = static_cast<uint8_t>(rng());
    for (size_t at = 0; at < b.size(); at += bytes) {
        b[at + 1] &= 0xbb;  // d, dmin finite: exponent below 0x1e, either sign
        b[at + 3] &= 0xbb;
    }
    return b;
}

void set_half(std::vector<uint8_t> &b, size_t at, uint16_t bits) { std::memcpy(b.data() + at, &bits, 2); }

// The dequantizer's values and the layer's, [rows, kKCols].
std::pair<at::Tensor, at::Tensor> k_values(GgmlType type, const std::vector<uint8_t> &b, int64_t rows,
                                           const std::vector<int64_t> *order = nullptr) {
    at::Tensor ref = at::empty({rows, kKCols}, at::kFloat);
    dequantize_ggml(static_cast<uint32_t>(type), b.data(), static_cast<uint64_t>(rows * kKCols), ref.data_ptr<float>());
    const auto layer = ggml_to_woq("x", static_cast<uint32_t>(type), b.data(), rows, kKCols, order);
    EXPECT_TRUE(layer.has_value());
    if (!layer) return {ref, ref};
    EXPECT_EQ(layer->group_size, 32);
    EXPECT_EQ(layer->groups(), kKCols / 32);
    EXPECT_EQ(layer->bits, type == GgmlType::q5_k ? 8 : 4);
    return {ref, dequantize(*layer)};
}

// |m1| of sub-block j of the block at b: dmin times its 6-bit min (the packing of gguf.cpp).
double k_min(const uint8_t *b, int j) {
    uint16_t bits;
    std::memcpy(&bits, b + 2, 2);
    const double dmin = static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
    const uint8_t *q = b + 4;
    const int m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    return std::fabs(dmin * m);
}

// Every element within 2^-24 (|dmin m| + 3 |w|) of the dequantizer's value (the q4_1 argument:
// d sc and dmin m are exact, then fl(m1/d1), fl(q - z), fl(t d1) against one rounding of
// d1 q - m1); returns how many differ at all.
int64_t expect_k_within_bound(GgmlType type, const std::vector<uint8_t> &b, int64_t rows, const at::Tensor &ref,
                              const at::Tensor &ours, const std::string &what) {
    uint64_t elements = 0, bytes = 0;
    ggml_type_layout(static_cast<uint32_t>(type), elements, bytes);
    const float *o = ours.data_ptr<float>(), *g = ref.data_ptr<float>();
    int64_t differ = 0;
    for (int64_t i = 0; i < rows * kKCols; ++i) {
        const uint8_t *block = b.data() + (i / 256) * bytes;
        const double bound = std::ldexp(k_min(block, static_cast<int>(i % 256 / 32)) + 3 * std::fabs(double(g[i])), -24) *
                             (1 + 1e-6);
        EXPECT_LE(std::fabs(double(o[i]) - g[i]), bound) << what << " element " << i;
        EXPECT_TRUE(std::isfinite(o[i])) << what << " element " << i;
        differ += o[i] != g[i];
    }
    return differ;
}

TEST(GgufWoq, KQuantsWithinStatedBound) {
    for (GgmlType type : {GgmlType::q4_k, GgmlType::q5_k}) {
        int64_t differ = 0, total = 0;
        for (uint32_t seed = 1; seed <= 6; ++seed) {
            const int64_t rows = 5 + 7 * seed;  // 12 .. 47: not multiples of 16
            const auto b = random_k_tensor(type, rows, seed);
            const auto [ref, ours] = k_values(type, b, rows);
            differ += expect_k_within_bound(type, b, rows, ref, ours,
                                            ggml_type_name(static_cast<uint32_t>(type)) + " seed " + std::to_string(seed));
            total += rows * kKCols;
        }
        RecordProperty(ggml_type_name(static_cast<uint32_t>(type)) + "_elements_not_bit_equal",
                       std::to_string(differ) + " of " + std::to_string(total));
    }
}

// The largest and smallest (subnormal) fp16 d and dmin, zero d (every sub-block -dmin m, held
// exactly), zero dmin (w = d sc q: (q - 0) d sc, exact), both zero, and a 6-bit scale of 0.
TEST(GgufWoq, KQuantsExtremeAndZeroScales) {
    const uint16_t largest = 0x7bff, tiny = 0x0001, zero = 0, neg_largest = 0xfbff;
    for (GgmlType type : {GgmlType::q4_k, GgmlType::q5_k}) {
        uint64_t elements = 0, bytes = 0;
        ggml_type_layout(static_cast<uint32_t>(type), elements, bytes);
        const int64_t rows = 3;
        auto b = random_k_tensor(type, rows, 11);
        const std::vector<std::pair<uint16_t, uint16_t>> cases = {
            {largest, largest}, {tiny, largest}, {largest, tiny}, {tiny, tiny}, {zero, largest}, {neg_largest, tiny}};
        for (size_t c = 0; c < cases.size(); ++c) {
            set_half(b, c * bytes, cases[c].first);
            set_half(b, c * bytes + 2, cases[c].second);
        }
        b[static_cast<size_t>(bytes) * 0 + 4] &= 0xc0;  // block 0, sub-block 0: 6-bit scale 0
        const auto [ref, ours] = k_values(type, b, rows);
        const std::string name = ggml_type_name(static_cast<uint32_t>(type));
        expect_k_within_bound(type, b, rows, ref, ours, name + " extremes");
        // zero d: the block (block 4 is row 2's first) equals the dequantizer exactly
        EXPECT_TRUE(at::equal(ours.flatten().slice(0, 4 * 256, 5 * 256), ref.flatten().slice(0, 4 * 256, 5 * 256))) << name;
        // block 0's sub-block 0 with scale 0: -dmin m exactly
        EXPECT_TRUE(at::equal(ours.flatten().slice(0, 0, 32), ref.flatten().slice(0, 0, 32))) << name;

        auto zmin = random_k_tensor(type, rows, 12);  // dmin = 0 everywhere: (q - 0) d sc, exact
        auto both = random_k_tensor(type, rows, 13);  // d = dmin = 0: all zero
        for (size_t at = 0; at < zmin.size(); at += bytes) {
            set_half(zmin, at + 2, zero);
            set_half(both, at, zero);
            set_half(both, at + 2, zero);
        }
        const auto [zr, zo] = k_values(type, zmin, rows);
        EXPECT_TRUE(at::equal(zo, zr)) << name << " dmin 0";  // equal values (a 0 may differ in sign)
        EXPECT_TRUE(same_bits(zo.abs(), zr.abs())) << name << " dmin 0";
        const auto [br, bo] = k_values(type, both, rows);
        EXPECT_TRUE(at::equal(bo, br)) << name << " d = dmin = 0";
        EXPECT_EQ(bo.abs().max().item<float>(), 0.f);
    }
}

TEST(GgufWoq, KQuantsRowOrderAndNonFiniteRefused) {
    const int64_t rows = 10;
    std::vector<int64_t> order(rows);
    for (int64_t r = 0; r < rows; ++r) order[static_cast<size_t>(r)] = (r * 3 + 1) % rows;
    const at::Tensor index = at::tensor(order, at::kLong);
    for (GgmlType type : {GgmlType::q4_k, GgmlType::q5_k}) {
        uint64_t elements = 0, bytes = 0;
        ggml_type_layout(static_cast<uint32_t>(type), elements, bytes);
        auto b = random_k_tensor(type, rows, 21);
        const auto [plain_ref, plain] = k_values(type, b, rows);
        const auto [ref, permuted] = k_values(type, b, rows, &order);
        EXPECT_TRUE(same_bits(permuted, plain.index_select(0, index).contiguous()));
        EXPECT_TRUE(ggml_woq_exact(static_cast<uint32_t>(type)));
        for (size_t field : {size_t(0), size_t(2)}) {  // an infinite d, then dmin, in block 7
            auto bad = b;
            set_half(bad, 7 * bytes + field, 0x7c00);
            EXPECT_FALSE(ggml_to_woq("x", static_cast<uint32_t>(type), bad.data(), rows, kKCols).has_value());
        }
    }
    EXPECT_FALSE(ggml_woq_exact(static_cast<uint32_t>(GgmlType::q6_k)));
}

}  // namespace
}  // namespace ipex::woq
