#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "base/errors.h"
#include "unit/test_errors.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/safetensors.h"

namespace {

using ipex::ExitCode;
using ipex::testing::code_of;

// A safetensors file built by hand: 8-byte little-endian header length, JSON, data.
std::string make_file(const std::string &header, const std::string &data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + data;
}

std::string floats(std::initializer_list<float> v) {
    return std::string(reinterpret_cast<const char *>(std::data(v)), v.size() * sizeof(float));
}

ipex::woq::SafetensorsHeader parse(const std::string &bytes) {
    return ipex::woq::parse_safetensors_header(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(),
                                               "t.safetensors");
}

void expect_bad(const std::string &bytes, const std::string &needle) {
    try {
        parse(bytes);
        FAIL() << "expected a bad-input error mentioning '" << needle << "'";
    } catch (const ipex::Error &e) {
        EXPECT_EQ(e.code(), ExitCode::bad_input);
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

class SafetensorsFiles : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/woq-st-XXXXXX";
        dir_ = mkdtemp(tmpl);
    }
    void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
    std::string write(const std::string &name, const std::string &bytes) {
        const std::string path = dir_ + "/" + name;
        std::ofstream(path, std::ios::binary) << bytes;
        return path;
    }
    std::string dir_;
};

const std::string kTwo =
    R"({"b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]},)"
    R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}})";

}  // namespace

TEST(Safetensors, ParsesHeaderSortedByOffset) {
    const auto h = parse(make_file(kTwo, std::string(16, '\0')));
    ASSERT_EQ(h.tensors.size(), 2u);
    EXPECT_EQ(h.tensors[0].name, "a");
    EXPECT_EQ(h.tensors[1].name, "b");
    EXPECT_EQ(h.tensors[1].type, at::kInt);
    EXPECT_EQ(h.metadata.at("k"), "v");
    EXPECT_EQ(h.data_start, 8 + kTwo.size());
}

TEST(Safetensors, RejectsMalformedHeaders) {
    expect_bad("abc", "shorter than the 8-byte");
    std::string huge = make_file("{}", "");
    huge[5] = 1;  // header length far beyond the file
    expect_bad(huge, "beyond the end of the file");
    expect_bad(make_file("{not json", ""), "not valid JSON");
    expect_bad(make_file("[1,2]", ""), "not a JSON object");
    expect_bad(make_file(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x"), "unknown dtype 'Q4'");
    expect_bad(make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"), "non-negative");
    expect_bad(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "abcdefgh"), "need 12");
    expect_bad(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd"), "beyond the data");
    expect_bad(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd"), "end before begin");
    expect_bad(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         "abcdefgh"),
               "overlaps");
    expect_bad(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "abcdefgh"), "gap");
    expect_bad(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcdefgh"),
               "belong to no tensor");
    expect_bad(make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],)"
                         R"("data_offsets":[0,4]}})", "abcd"),
               "too large");
    expect_bad(make_file(R"({"__metadata__":{"k":1}})", ""), "not a string");
}

TEST_F(SafetensorsFiles, ReadsTensorsFromFile) {
    const std::string path = write("m.safetensors", make_file(kTwo, floats({1.5f, -2.0f}) + std::string("\x07\0\0\0\xff\xff\xff\xff", 8)));
    ipex::woq::SafetensorsFile f(path);
    EXPECT_TRUE(at::equal(f.tensor("a"), at::tensor({1.5f, -2.0f})));
    EXPECT_TRUE(at::equal(f.tensor("b"), at::tensor({7, -1}, at::kInt)));
    EXPECT_EQ(code_of([&] { f.tensor("zzz"); }), ExitCode::bad_input);
}

TEST_F(SafetensorsFiles, WriterRoundTripsEveryDtype) {
    const std::vector<std::pair<std::string, at::Tensor>> tensors = {
        {"f32", at::randn({3, 5})},
        {"bf16", at::randn({4}).to(at::kBFloat16)},
        {"f16", at::randn({2, 2}).to(at::kHalf)},
        {"i32", at::randint(-100, 100, {7}, at::kInt)},
        {"i64", at::randint(-100, 100, {1, 3}, at::kLong)},
        {"i8", at::randint(-100, 100, {6}, at::kChar)},
        {"u8", at::randint(0, 255, {3, 3}, at::kByte)},
        {"empty", at::empty({0, 4})},
    };
    const std::string path = dir_ + "/w.safetensors";
    ipex::woq::write_safetensors(path, tensors, {{"format", "test"}});
    ipex::woq::SafetensorsFile f(path);
    EXPECT_EQ(f.header().metadata.at("format"), "test");
    for (const auto &[name, t] : tensors) {
        const at::Tensor r = f.tensor(name);
        EXPECT_EQ(r.scalar_type(), t.scalar_type()) << name;
        EXPECT_TRUE(at::equal(r, t)) << name;
    }
}

// Views: tensors stored one after another in the asked order, of one dtype and one row
// length, become one tensor over the mapping; anything else gives an undefined tensor.
TEST_F(SafetensorsFiles, ViewsStackNeighboursInPlaceAndRefuseTheRest) {
    const at::Tensor q = at::randn({3, 4}).to(at::kBFloat16), k = at::randn({2, 4}).to(at::kBFloat16);
    const at::Tensor v = at::randn({1, 4}).to(at::kBFloat16), o = at::randn({2, 5}).to(at::kBFloat16);
    const at::Tensor f = at::randn({2, 4});
    const std::string path = dir_ + "/v.safetensors";
    ipex::woq::write_safetensors(path, {{"q", q}, {"k", k}, {"v", v}, {"o", o}, {"f", f}}, {});
    at::Tensor qkv, single;
    {
        ipex::woq::Checkpoint c(path);
        qkv = c.view({"q", "k", "v"});
        single = c.view({"o"});
        ASSERT_TRUE(qkv.defined());
        EXPECT_EQ(qkv.sizes(), (std::vector<int64_t>{6, 4}));
        EXPECT_EQ(qkv.scalar_type(), at::kBFloat16);
        EXPECT_TRUE(c.view({"k", "v"}).defined());
        EXPECT_FALSE(c.view({"q", "v"}).defined());       // not neighbours
        EXPECT_FALSE(c.view({"k", "q"}).defined());       // neighbours, other order
        EXPECT_FALSE(c.view({"v", "o"}).defined());       // other row length
        EXPECT_FALSE(c.view({"o", "f"}).defined());       // other dtype
        EXPECT_FALSE(c.view({"q", "missing"}).defined());
        EXPECT_FALSE(c.view({}).defined());
        // A copy read afterwards releases its pages; the view faults them back in.
        EXPECT_TRUE(at::equal(c.tensor("k"), k));
    }
    // The views keep the mapping alive past the checkpoint.
    EXPECT_TRUE(at::equal(qkv, at::cat({q, k, v}, 0)));
    EXPECT_TRUE(at::equal(single, o));
    ipex::woq::release_mapped_pages(qkv.data_ptr(), qkv.nbytes());
    EXPECT_TRUE(at::equal(qkv, at::cat({q, k, v}, 0)));
}

TEST_F(SafetensorsFiles, ReadsShardedCheckpointThroughIndex) {
    ipex::woq::write_safetensors(dir_ + "/s1.safetensors", {{"x", at::ones({2})}}, {});
    ipex::woq::write_safetensors(dir_ + "/s2.safetensors", {{"y", at::zeros({3})}}, {});
    write("model.safetensors.index.json",
          R"({"metadata":{},"weight_map":{"x":"s1.safetensors","y":"s2.safetensors"}})");
    ipex::woq::Checkpoint c(dir_);
    EXPECT_EQ(c.names(), (std::vector<std::string>{"x", "y"}));
    EXPECT_TRUE(at::equal(c.tensor("y"), at::zeros({3})));
    EXPECT_EQ(c.files().size(), 2u);
}

TEST_F(SafetensorsFiles, IndexErrorsAreBadInput) {
    ipex::woq::write_safetensors(dir_ + "/s1.safetensors", {{"x", at::ones({2})}}, {});
    const std::string wrong = write("wrong.json", R"({"weight_map":{"y":"s1.safetensors"}})");
    EXPECT_EQ(code_of([&] { ipex::woq::Checkpoint c(wrong); }), ExitCode::bad_input);
    const std::string escape = write("escape.json", R"({"weight_map":{"x":"../s1.safetensors"}})");
    EXPECT_EQ(code_of([&] { ipex::woq::Checkpoint c(escape); }), ExitCode::bad_input);
    const std::string missing = write("missing.json", R"({"weight_map":{"x":"nope.safetensors"}})");
    EXPECT_EQ(code_of([&] { ipex::woq::Checkpoint c(missing); }), ExitCode::bad_input);
    const std::string notjson = write("bad.json", "{");
    EXPECT_EQ(code_of([&] { ipex::woq::Checkpoint c(notjson); }), ExitCode::bad_input);
}

TEST(QuantConfig, ReadsTheThreeConfigFlavours) {
    auto gptq = ipex::woq::parse_quant_config(
        R"({"bits":4,"group_size":128,"desc_act":true,"sym":false,"checkpoint_format":"gptq_v2"})", "q.json");
    EXPECT_EQ(gptq.bits, 4);
    EXPECT_EQ(gptq.group_size, 128);
    EXPECT_TRUE(*gptq.desc_act);
    EXPECT_FALSE(*gptq.sym);
    EXPECT_EQ(gptq.checkpoint_format, "gptq_v2");
    auto awq = ipex::woq::parse_quant_config(R"({"zero_point":true,"q_group_size":64,"w_bit":4,"version":"GEMM"})",
                                             "quant_config.json");
    EXPECT_EQ(awq.method, "awq");
    EXPECT_EQ(awq.group_size, 64);
    EXPECT_EQ(awq.awq_version, "gemm");
    auto hf = ipex::woq::parse_quant_config(
        R"({"model_type":"llama","quantization_config":{"quant_method":"gptq","bits":8,"group_size":-1}})",
        "config.json");
    EXPECT_EQ(hf.method, "gptq");
    EXPECT_EQ(hf.bits, 8);
    EXPECT_EQ(hf.group_size, -1);
    auto plain = ipex::woq::parse_quant_config(R"({"model_type":"llama"})", "config.json");
    EXPECT_TRUE(plain.method.empty());
}

TEST(QuantConfig, WrongTypesAndMethodsAreErrors) {
    EXPECT_EQ(code_of([] { ipex::woq::parse_quant_config(R"({"bits":"4"})", "q.json"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] { ipex::woq::parse_quant_config("{", "q.json"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] { ipex::woq::parse_quant_config(R"({"quant_method":"bitsandbytes"})", "q.json"); }),
              ExitCode::unsupported);
    EXPECT_EQ(code_of([] { ipex::woq::parse_quant_config(R"({"desc_act":1})", "q.json"); }), ExitCode::bad_input);
}
