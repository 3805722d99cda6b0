#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>

#include "base/errors.h"
#include "core/npy.h"

namespace {

// Builds an .npy v1.0 file: magic, version, header padded to 64 bytes, then data.
std::string make_npy(const std::string &descr, const std::string &shape, const std::string &data,
                     bool fortran = false) {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                         ", 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    return out + header + data;
}

template <typename T>
std::string bytes_of(const std::vector<T> &v) {
    return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
}

void expect_bad(const std::string &bytes, const std::string &needle) {
    try {
        ipex::parse_npy(bytes, "x.npy");
        FAIL() << "expected a bad-input error mentioning '" << needle << "'";
    } catch (const ipex::Error &e) {
        EXPECT_EQ(e.code(), ipex::ExitCode::bad_input);
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

}  // namespace

TEST(Npy, ReadsFloat32COrder) {
    std::vector<float> v{1, 2, 3, 4, 5, 6};
    at::Tensor t = ipex::parse_npy(make_npy("<f4", "(2, 3)", bytes_of(v)), "x.npy");
    ASSERT_EQ(t.sizes(), at::IntArrayRef({2, 3}));
    EXPECT_EQ(t.scalar_type(), at::kFloat);
    EXPECT_FLOAT_EQ(t[1][2].item<float>(), 6.0f);
}

TEST(Npy, ReadsFortranOrderAsLogicalLayout) {
    // Fortran order stores columns first: [[1,2,3],[4,5,6]] is 1,4,2,5,3,6.
    std::vector<float> v{1, 4, 2, 5, 3, 6};
    at::Tensor t = ipex::parse_npy(make_npy("<f4", "(2, 3)", bytes_of(v), true), "x.npy");
    EXPECT_TRUE(at::equal(t, at::arange(1, 7, at::kFloat).reshape({2, 3})));
}

TEST(Npy, ReadsBigEndianAndIntegers) {
    std::string be = {0, 0, 0, 0, 0, 0, 1, 2};  // big-endian int64 258
    at::Tensor t = ipex::parse_npy(make_npy(">i8", "(1,)", be), "x.npy");
    EXPECT_EQ(t.item<int64_t>(), 258);
    std::vector<int32_t> iv{-7, 9};
    t = ipex::parse_npy(make_npy("<i4", "(2,)", bytes_of(iv)), "x.npy");
    EXPECT_EQ(t.scalar_type(), at::kInt);
    EXPECT_EQ(t[0].item<int32_t>(), -7);
}

TEST(Npy, ReadsScalarAndEmpty) {
    std::vector<double> v{2.5};
    EXPECT_EQ(ipex::parse_npy(make_npy("<f8", "()", bytes_of(v)), "x.npy").item<double>(), 2.5);
    EXPECT_EQ(ipex::parse_npy(make_npy("<f4", "(0, 4)", ""), "x.npy").numel(), 0);
}

TEST(Npy, RejectsMalformedFiles) {
    std::vector<float> v{1, 2};
    const std::string good = make_npy("<f4", "(2,)", bytes_of(v));
    expect_bad("", "magic");
    expect_bad("NUMPY", "magic");
    expect_bad(std::string("\x93NUMPY\x09\x00\x10\x00", 10), "version");
    expect_bad(good.substr(0, 20), "truncated inside the header");
    expect_bad(good.substr(0, good.size() - 1), "truncated");
    expect_bad(make_npy("<c8", "(2,)", bytes_of(v)), "unsupported dtype");
    expect_bad(make_npy("<f4", "(2, -1)", bytes_of(v)), "shape");
    expect_bad(make_npy("<f4", "(1099511627777, 1)", ""), "too large");
    expect_bad(make_npy("<f4", "(99999999999, 99999999999)", ""), "larger than 8 GiB");
    expect_bad(make_npy("<f4", "(1099511627776, 1099511627776)", ""), "larger than 8 GiB");
    expect_bad(make_npy("<f4", "[2]", bytes_of(v)), "'shape' is not a tuple");
    std::string no_descr = good;
    no_descr.replace(no_descr.find("descr"), 5, "dxscr");
    expect_bad(no_descr, "descr");
}

TEST(Npy, RandomCorruptionNeverCrashes) {
    std::vector<float> v(12, 1.5f);
    const std::string good = make_npy("<f4", "(3, 4)", bytes_of(v));
    std::mt19937 rng(7);
    for (int i = 0; i < 3000; ++i) {
        std::string bytes = good;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<char>(rng());
        if (rng() % 3 == 0) bytes.resize(rng() % bytes.size());
        try {
            at::Tensor t = ipex::parse_npy(bytes, "fuzz.npy");
            EXPECT_LE(static_cast<uint64_t>(t.numel() * t.element_size()), bytes.size());
        } catch (const ipex::Error &e) {
            EXPECT_EQ(e.code(), ipex::ExitCode::bad_input);
        }
    }
}
