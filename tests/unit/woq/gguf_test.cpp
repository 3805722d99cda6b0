// GGUF: every block type dequantized against a reference written here from the format's
// definition (bit fields read one by one), on blocks of random bytes; and the header parser's
// refusals on crafted files.
#include <gtest/gtest.h>

#include <c10/util/Half.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/errors.h"
#include "checkpoint/gguf.h"
#include "unit/test_errors.h"

namespace ipex::woq {
namespace {

using testing::code_of;

float half_at(const std::vector<uint8_t> &b, size_t at) {
    const uint16_t bits = static_cast<uint16_t>(b[at] | (b[at + 1] << 8));
    return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}

// Random bytes with finite fp16 scales at the given offsets.
std::vector<uint8_t> block(size_t bytes, std::initializer_list<size_t> halves, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> b(bytes);
    for (auto &x : b) x = static_cast<uint8_t>(rng());
    for (size_t h : halves) b[h + 1] &= 0x3b;  // exponent below 0x1e: finite and moderate
    return b;
}

// The 6-bit scale (field 0) or min (field 1) of sub-block j of a K-quant's 12 bytes: sub-blocks
// 0-3 keep theirs in the low 6 bits of bytes j / j + 4; 4-7 in the nibbles of byte j + 4 with
// the top 2 bits in the high bits of bytes j - 4 / j.
int k_field(const std::vector<uint8_t> &b, size_t base, int j, int field) {
    const uint8_t *q = b.data() + base;
    if (j < 4) return q[j + 4 * field] & 63;
    const int low = field == 0 ? (q[j + 4] & 0xF) : (q[j + 4] >> 4);
    const int high = (field == 0 ? q[j - 4] : q[j]) >> 6;
    return low | (high << 4);
}

std::vector<float> reference(GgmlType type, const std::vector<uint8_t> &b) {
    std::vector<float> y;
    switch (type) {
    case GgmlType::q4_0:
        for (int i = 0; i < 32; ++i) y.push_back(half_at(b, 0) * static_cast<float>(((b[2 + i % 16] >> (i < 16 ? 0 : 4)) & 15) - 8));
        break;
    case GgmlType::q4_1:
        for (int i = 0; i < 32; ++i)
            y.push_back(half_at(b, 0) * static_cast<float>((b[4 + i % 16] >> (i < 16 ? 0 : 4)) & 15) + half_at(b, 2));
        break;
    case GgmlType::q5_0:
    case GgmlType::q5_1: {
        const bool m = type == GgmlType::q5_1;
        const size_t qh = m ? 4 : 2, qs = qh + 4;
        for (int i = 0; i < 32; ++i) {
            const int low = (b[qs + i % 16] >> (i < 16 ? 0 : 4)) & 15;
            const int high = (b[qh + i / 8] >> (i % 8)) & 1;  // bit i of the 32-bit field
            const int q = low | (high << 4);
            y.push_back(m ? half_at(b, 0) * static_cast<float>(q) + half_at(b, 2) : half_at(b, 0) * static_cast<float>(q - 16));
        }
        break;
    }
    case GgmlType::q8_0:
        for (int i = 0; i < 32; ++i) y.push_back(half_at(b, 0) * static_cast<float>(static_cast<int8_t>(b[2 + i])));
        break;
    case GgmlType::q4_k:
    case GgmlType::q5_k: {
        const bool five = type == GgmlType::q5_k;
        const size_t qs = five ? 48 : 16;
        for (int i = 0; i < 256; ++i) {
            const int sub = i / 32;                       // 8 sub-blocks of 32
            const int byte = (i / 64) * 32 + i % 32;      // 64 values share 32 bytes: low then high nibbles
            const int nibble = (b[qs + byte] >> ((sub % 2) * 4)) & 15;
            const int high = five ? (b[16 + i % 32] >> sub) & 1 : 0;  // bit `sub` of byte i % 32
            const float v = half_at(b, 0) * k_field(b, 4, sub, 0) * static_cast<float>(nibble + 16 * high) -
                            half_at(b, 2) * k_field(b, 4, sub, 1);
            y.push_back(v);
        }
        break;
    }
    case GgmlType::q6_k:
        for (int i = 0; i < 256; ++i) {
            const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
            const int low = (b[half * 64 + l + (quarter % 2) * 32] >> ((quarter / 2) * 4)) & 15;
            const int high = (b[128 + half * 32 + l] >> (quarter * 2)) & 3;
            const int scale = static_cast<int8_t>(b[192 + half * 8 + l / 16 + quarter * 2]);
            y.push_back(half_at(b, 208) * static_cast<float>(scale) * static_cast<float>((low | (high << 4)) - 32));
        }
        break;
    default: break;
    }
    return y;
}

TEST(Gguf, EveryBlockTypeDequantizesAsDefined) {
    struct Case {
        GgmlType type;
        size_t bytes;
        std::initializer_list<size_t> halves;
    };
    const Case cases[] = {{GgmlType::q4_0, 18, {0}},    {GgmlType::q4_1, 20, {0, 2}},  {GgmlType::q5_0, 22, {0}},
                          {GgmlType::q5_1, 24, {0, 2}}, {GgmlType::q8_0, 34, {0}},     {GgmlType::q4_k, 144, {0, 2}},
                          {GgmlType::q5_k, 176, {0, 2}}, {GgmlType::q6_k, 210, {208}}};
    for (const Case &c : cases)
        for (uint32_t seed = 1; seed <= 20; ++seed) {
            const auto b = block(c.bytes, c.halves, seed);
            const auto want = reference(c.type, b);
            std::vector<float> got(want.size());
            dequantize_ggml(static_cast<uint32_t>(c.type), b.data(), want.size(), got.data());
            for (size_t i = 0; i < want.size(); ++i)
                ASSERT_NEAR(got[i], want[i], 1e-6f * (1 + std::abs(want[i])))
                    << ggml_type_name(static_cast<uint32_t>(c.type)) << " seed " << seed << " element " << i;
        }
}

// A minimal v3 file: one f32 tensor "t" of `dims`, data aligned to 32.
std::string tiny_file(uint32_t version, uint64_t dim, uint32_t type, uint64_t offset, size_t data_bytes) {
    std::string s = "GGUF";
    const auto put = [&](const void *p, size_t n) { s.append(static_cast<const char *>(p), n); };
    const uint64_t tensors = 1, kvs = 0, name_len = 1, rank = 1;
    put(&version, 4);
    put(&tensors, 8);
    put(&kvs, 8);
    put(&name_len, 8);
    s += "t";
    const uint32_t r = static_cast<uint32_t>(rank);
    put(&r, 4);
    put(&dim, 8);
    put(&type, 4);
    put(&offset, 8);
    s.resize((s.size() + 31) / 32 * 32, '\0');
    s.append(data_bytes, '\0');
    return s;
}

GgufHeader parse(const std::string &s) {
    return parse_gguf_header(reinterpret_cast<const uint8_t *>(s.data()), s.size(), "t.gguf");
}

TEST(Gguf, HeaderRefusals) {
    const GgufHeader ok = parse(tiny_file(3, 8, 0, 0, 32));
    ASSERT_EQ(ok.tensors.size(), 1u);
    EXPECT_EQ(ok.tensors[0].bytes, 32u);
    EXPECT_EQ(ok.tensors[0].shape, std::vector<int64_t>{8});
    EXPECT_EQ(code_of([] { parse(tiny_file(1, 8, 0, 0, 32)); }), ExitCode::unsupported);   // version 1
    EXPECT_EQ(code_of([] { parse(tiny_file(3, 8, 0, 0, 16)); }), ExitCode::bad_input);     // past the end
    EXPECT_EQ(code_of([] { parse(tiny_file(3, 8, 0, 7, 64)); }), ExitCode::bad_input);     // unaligned offset
    EXPECT_EQ(code_of([] { parse(tiny_file(3, 40, 2, 0, 64)); }), ExitCode::bad_input);    // q4_0 rows of 40
    EXPECT_EQ(code_of([] { parse(tiny_file(3, 0, 0, 0, 32)); }), ExitCode::bad_input);     // zero dimension
    EXPECT_EQ(code_of([] { parse(tiny_file(3, uint64_t(1) << 62, 0, 0, 32)); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] { parse(tiny_file(3, 8, 99, 0, 32)); }), ExitCode::unsupported);  // unknown type
    std::string bad_magic = tiny_file(3, 8, 0, 0, 32);
    bad_magic[0] = 'X';
    EXPECT_EQ(code_of([&] { parse(bad_magic); }), ExitCode::bad_input);
    const std::string whole = tiny_file(3, 8, 0, 0, 32);
    for (size_t cut = 0; cut < 60; ++cut)  // every truncation of the header
        EXPECT_EQ(code_of([&] { parse(whole.substr(0, cut)); }), ExitCode::bad_input) << cut;
}

}  // namespace
}  // namespace ipex::woq
