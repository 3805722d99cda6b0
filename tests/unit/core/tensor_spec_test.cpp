#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/errors.h"
#include "unit/test_errors.h"
#include "core/tensor_spec.h"

namespace fs = std::filesystem;
using ipex::testing::code_of;

namespace {

fs::path temp_dir() {
    fs::path dir = fs::temp_directory_path() / ("ipex-spec-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir;
}

}  // namespace

TEST(TensorSpec, ParsesShapesAndDtypes) {
    auto s = ipex::parse_shape_spec("16x3x224x224");
    EXPECT_EQ(s.sizes, (std::vector<int64_t>{16, 3, 224, 224}));
    EXPECT_EQ(s.dtype, at::kFloat);
    s = ipex::parse_shape_spec("2x8:bf16");
    EXPECT_EQ(s.dtype, at::kBFloat16);
    s = ipex::parse_shape_spec("4x128:int64:30522");
    EXPECT_EQ(s.dtype, at::kLong);
    EXPECT_EQ(s.high, 30522);
}

TEST(TensorSpec, RejectsMalformedShapes) {
    for (const char *bad : {"16x", "x3", "16xx3", "0x3", "16x3:fp8", "16x3:int64:0", "16x3:fp32:5",
                            "99999999999x99999999999", "3x-1", "16x3:int64:abc"}) {
        EXPECT_EQ(code_of([&] { ipex::parse_shape_spec(bad); }), ipex::ExitCode::usage) << bad;
    }
    EXPECT_EQ(code_of([] { ipex::make_inputs({"no-such-thing"}, 0); }), ipex::ExitCode::usage);
    EXPECT_EQ(code_of([] { ipex::make_inputs({"missing.pt"}, 0); }), ipex::ExitCode::bad_input);
}

TEST(TensorSpec, RandomInputsAreSeededAndTyped) {
    auto a = ipex::make_inputs({"2x3", "4:int64:5", "2x2:bf16"}, 11);
    auto b = ipex::make_inputs({"2x3", "4:int64:5", "2x2:bf16"}, 11);
    ASSERT_EQ(a.size(), 3u);
    EXPECT_TRUE(at::equal(a[0].toTensor(), b[0].toTensor()));
    EXPECT_EQ(a[1].toTensor().scalar_type(), at::kLong);
    EXPECT_LT(a[1].toTensor().max().item<int64_t>(), 5);
    EXPECT_GE(a[1].toTensor().min().item<int64_t>(), 0);
    EXPECT_EQ(a[2].toTensor().scalar_type(), at::kBFloat16);
    auto c = ipex::make_inputs({"2x3"}, 12);
    EXPECT_FALSE(at::equal(a[0].toTensor(), c[0].toTensor()));
}

TEST(TensorSpec, LoadsTorchSaveFilesAndTuples) {
    const fs::path dir = temp_dir();
    const at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3});
    const at::Tensor y = at::ones({4}, at::kLong);
    auto write = [](const fs::path &p, const c10::IValue &v) {
        std::vector<char> bytes = torch::pickle_save(v);
        std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    };
    write(dir / "one.pt", x);
    write(dir / "pair.pt", c10::ivalue::Tuple::create({x, y}));
    write(dir / "str.pt", c10::IValue(std::string("hello")));
    auto one = ipex::make_inputs({(dir / "one.pt").string()}, 0);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_TRUE(at::equal(one[0].toTensor(), x));
    auto pair = ipex::make_inputs({(dir / "pair.pt").string()}, 0);
    ASSERT_EQ(pair.size(), 2u);
    EXPECT_TRUE(at::equal(pair[1].toTensor(), y));
    EXPECT_EQ(code_of([&] { ipex::make_inputs({(dir / "str.pt").string()}, 0); }), ipex::ExitCode::bad_input);
    std::ofstream(dir / "junk.pt") << "not a pickle";
    EXPECT_EQ(code_of([&] { ipex::make_inputs({(dir / "junk.pt").string()}, 0); }), ipex::ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { ipex::make_inputs({dir.string()}, 0); }), ipex::ExitCode::usage);
    fs::remove_all(dir);
}

TEST(TensorSpec, DescribesInputs) {
    auto in = ipex::make_inputs({"2x3", "5:int64"}, 0);
    EXPECT_EQ(ipex::describe_inputs(in), "2x3:fp32,5:int64");
}
