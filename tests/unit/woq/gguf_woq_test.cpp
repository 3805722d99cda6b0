// GGUF blocks held as weight-only layers (checkpoint/gguf_woq.h): the layer dequantizes to the
// values the GGUF dequantizer gives, bit for bit for q4_0 and q8_0 and within the stated bound for
// q4_1, q4_K and q5_K, on random blocks (random fp16 scales of both signs; for the K-quants also
// the largest and smallest fp16 scales, zero d, zero dmin, and row counts that are not a multiple
// of the loader's row grain), with and without a row order; q6_K, converted to int8 groups of 32,
// within half a step of each group's int8 grid (about 1/8 of the q6_K step) on the same kinds of
// blocks.
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
    EXPECT_EQ(layer->bits, type == GgmlType::q4_k ? 4 : 8);
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

// ---- q6_K: 210-byte blocks of 256 (128 low nibbles, 64 high bit pairs, 16 int8 sc, fp16 d at 208).

constexpr size_t kQ6Bytes = 210, kQ6D = 208, kQ6Scales = 192;

std::vector<uint8_t> random_q6_tensor(int64_t rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> b(static_cast<size_t>(rows * kKCols / 256) * kQ6Bytes);
    for (auto &x : b) x = static_cast<uint8_t>(rng());
    for (size_t at = 0; at < b.size(); at += kQ6Bytes) b[at + kQ6D + 1] &= 0xbb;  // d finite, either sign
    return b;
}

// Every element within half a step of its group's int8 grid: |ours - w| <= max|w| / 254 over the
// group's 32 dequantized values (the fp32 roundings add under 1e-4 of it), hence within 32/254 of
// the larger q6_K step |d sc| of the group's two sub-blocks; a group of zeros exactly. Returns the
// largest error as a fraction of that q6_K step.
double expect_q6_within_bound(const std::vector<uint8_t> &b, int64_t rows, const at::Tensor &ref, const at::Tensor &ours,
                              const std::string &what) {
    const float *o = ours.data_ptr<float>(), *g = ref.data_ptr<float>();
    double worst_step = 0;
    for (int64_t g0 = 0; g0 < rows * kKCols; g0 += 32) {
        double amax = 0;
        for (int64_t i = g0; i < g0 + 32; ++i) amax = std::max(amax, std::fabs(double(g[i])));
        const uint8_t *block = b.data() + static_cast<size_t>(g0 / 256) * kQ6Bytes;
        uint16_t bits;
        std::memcpy(&bits, block + kQ6D, 2);
        const double d = static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
        // the group's two sub-blocks of 16 and their scales (gguf.cpp's element order: scale
        // index 8 (e / 128) + 2 (e % 128 / 32) + e % 32 / 16 for element e of the block)
        const int64_t e = g0 % 256;
        const int sc_index = static_cast<int>(8 * (e / 128) + 2 * (e % 128 / 32));
        const auto *sc = reinterpret_cast<const int8_t *>(block + kQ6Scales);
        const double step = std::fabs(d) * std::max(std::abs(int(sc[sc_index])), std::abs(int(sc[sc_index + 1])));
        EXPECT_LE(amax, 32 * step) << what << " group at " << g0;
        for (int64_t i = g0; i < g0 + 32; ++i) {
            const double err = std::fabs(double(o[i]) - g[i]);
            EXPECT_TRUE(std::isfinite(o[i])) << what << " element " << i;
            EXPECT_LE(err, amax / 254 * (1 + 1e-4)) << what << " element " << i << " group max " << amax;
            if (amax == 0) EXPECT_EQ(o[i], 0.f) << what << " element " << i;
            if (step > 0) worst_step = std::max(worst_step, err / step);
        }
    }
    return worst_step;
}

std::pair<at::Tensor, at::Tensor> q6_values(const std::vector<uint8_t> &b, int64_t rows,
                                            const std::vector<int64_t> *order = nullptr) {
    const auto type = static_cast<uint32_t>(GgmlType::q6_k);
    at::Tensor ref = at::empty({rows, kKCols}, at::kFloat);
    dequantize_ggml(type, b.data(), static_cast<uint64_t>(rows * kKCols), ref.data_ptr<float>());
    const auto layer = ggml_to_woq("x", type, b.data(), rows, kKCols, order);
    EXPECT_TRUE(layer.has_value());
    if (!layer) return {ref, ref};
    EXPECT_EQ(layer->bits, 8);
    EXPECT_EQ(layer->group_size, 32);
    EXPECT_EQ(layer->source_group_size, 16);  // how the loader tells a converted layer
    EXPECT_EQ(at::sub(layer->zeros, 128).abs().max().item<float>(), 0.f);  // symmetric, as q8_0
    return {ref, dequantize(*layer)};
}

TEST(GgufWoq, Q6KConvertedWithinHalfAnInt8Step) {
    EXPECT_TRUE(ggml_woq_held(static_cast<uint32_t>(GgmlType::q6_k)));
    double worst = 0;
    int64_t differ = 0, total = 0;
    for (uint32_t seed = 1; seed <= 6; ++seed) {
        const int64_t rows = 5 + 7 * seed;  // 12 .. 47: not multiples of 16
        const auto b = random_q6_tensor(rows, seed);
        const auto [ref, ours] = q6_values(b, rows);
        worst = std::max(worst, expect_q6_within_bound(b, rows, ref, ours, "seed " + std::to_string(seed)));
        differ += at::ne(ours, ref).sum().item<int64_t>();
        total += rows * kKCols;
    }
    EXPECT_LE(worst, 32.0 / 254 * (1 + 1e-4));
    RecordProperty("q6_K_worst_error_in_q6_K_steps", std::to_string(worst));
    RecordProperty("q6_K_elements_not_bit_equal", std::to_string(differ) + " of " + std::to_string(total));
}

// The largest, smallest (subnormal) and negative fp16 d, d = 0 (all zeros, exact), the int8
// scales' extremes -128 and 127 beside 1 in one group, a group whose two scales are 0 (zeros,
// exact); an infinite d is refused; a row order permutes the rows as for the other types.
TEST(GgufWoq, Q6KExtremesZerosRowOrderAndNonFinite) {
    const int64_t rows = 3;
    auto b = random_q6_tensor(rows, 31);
    const uint16_t d_cases[] = {0x7bff, 0x0001, 0x0000, 0xfbff, 0x3c00, 0x8001};
    for (size_t c = 0; c < 6; ++c) set_half(b, c * kQ6Bytes + kQ6D, d_cases[c]);
    auto *sc = reinterpret_cast<int8_t *>(b.data() + 4 * kQ6Bytes + kQ6Scales);  // block 4, d = 1
    sc[0] = -128, sc[1] = 1, sc[2] = 127, sc[3] = -1, sc[4] = 0, sc[5] = 0;  // groups 0, 1; group 2 zeros
    const auto [ref, ours] = q6_values(b, rows);
    expect_q6_within_bound(b, rows, ref, ours, "extremes");
    EXPECT_TRUE(at::equal(ours.flatten().slice(0, 2 * 256, 3 * 256), ref.flatten().slice(0, 2 * 256, 3 * 256)));  // d = 0
    EXPECT_EQ(ours.flatten().slice(0, 4 * 256 + 64, 4 * 256 + 96).abs().max().item<float>(), 0.f);  // sc 0, 0

    std::vector<int64_t> order(rows);
    for (int64_t r = 0; r < rows; ++r) order[static_cast<size_t>(r)] = (r + 2) % rows;
    const auto [r2, permuted] = q6_values(b, rows, &order);
    EXPECT_TRUE(same_bits(permuted, ours.index_select(0, at::tensor(order, at::kLong)).contiguous()));

    set_half(b, 5 * kQ6Bytes + kQ6D, 0x7c00);
    EXPECT_FALSE(ggml_to_woq("x", static_cast<uint32_t>(GgmlType::q6_k), b.data(), rows, kKCols).has_value());
}

}  // namespace
}  // namespace ipex::woq
