// oneDNN verbose parsing on logs in the 2.x and 3.x formats, and the --require-isa rule.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/errors.h"
#include "base/log.h"
#include "base/isa_check.h"
#include "base/onednn_verbose.h"

namespace ipex::launch {
namespace {

std::string read_data(const std::string &name) {
    std::ifstream in(std::string(IPEX_LAUNCH_TEST_DATA) + "/" + name);
    EXPECT_TRUE(in) << name;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

VerboseInfo info_of(const std::string &text) {
    VerboseInfo info;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) parse_verbose_info_line(line, info);
    return info;
}

int count_of(const VerboseStats &s, const std::string &kind, const std::string &impl) {
    auto it = s.by_kind_impl.find({kind, impl});
    return it == s.by_kind_impl.end() ? 0 : it->second.count;
}

TEST(Verbose, OneDnn2AmxLog) {
    const std::string text = read_data("onednn2_amx.log");
    const VerboseStats s = parse_verbose_text(text);
    EXPECT_EQ(s.exec_lines, 7);
    EXPECT_EQ(count_of(s, "convolution", "brgconv:avx512_core_amx"), 2);
    EXPECT_EQ(count_of(s, "convolution", "jit:avx512_core_bf16"), 1);
    EXPECT_EQ(count_of(s, "inner_product", "brgemm:avx512_core_amx"), 1);
    EXPECT_EQ(count_of(s, "reorder", "jit:uni"), 1);
    EXPECT_TRUE(s.used_amx());
    // Compute: 0.25 (bf16 stem) + 2.0 + 0.5 + 0.2 (AMX) ms.
    EXPECT_NEAR(compute_share_satisfying(s, "avx512_core_amx"), 2.7 / 2.95, 1e-4);
    EXPECT_NEAR(compute_share_satisfying(s, "avx512_core_bf16"), 1.0, 1e-9);
    const VerboseInfo info = info_of(text);
    EXPECT_EQ(info.version, "v2.7.3");
    EXPECT_EQ(info.isa.rfind("Intel AVX-512 with float16, Intel DL Boost", 0), 0u) << info.isa;
}

TEST(Verbose, OneDnn3LogWithTimestamps) {
    const std::string text = read_data("onednn3_amx.log");
    const VerboseStats s = parse_verbose_text(text);
    EXPECT_EQ(s.exec_lines, 6);
    EXPECT_EQ(count_of(s, "matmul", "brg:avx512_core_amx"), 3);
    EXPECT_EQ(count_of(s, "matmul", "gemm:jit"), 1);
    EXPECT_TRUE(s.used_amx());
    EXPECT_NEAR(compute_share_satisfying(s, "avx512_core_amx"), 3.4 / 4.0, 1e-4);
    EXPECT_EQ(info_of(text).version, "v3.3.6");
}

TEST(Verbose, OneDnn3V1Log) {
    const std::string text = read_data("onednn3_v1.log");
    const VerboseStats s = parse_verbose_text(text);
    EXPECT_EQ(s.exec_lines, 4);  // error and create lines are not executions
    EXPECT_EQ(count_of(s, "convolution", "brg_conv_fwd:avx512_core_amx"), 2);
    EXPECT_EQ(count_of(s, "matmul", "brg_matmul:avx10_1_512_amx"), 1);
    EXPECT_NEAR(s.total_ms, 2.5, 1e-9);
    EXPECT_NEAR(compute_share_satisfying(s, "avx512_core_amx"), 1.0, 1e-9);
    const VerboseInfo info = info_of(text);
    EXPECT_EQ(info.version, "v3.5.3");
    EXPECT_NE(info.isa.find("Intel AMX"), std::string::npos);
}

TEST(Verbose, LiveLogFromThisMachineHasNoAmx) {
    const std::string text = read_data("onednn2_live_avx512_bf16.log");
    const VerboseStats s = parse_verbose_text(text);
    EXPECT_EQ(s.exec_lines, 3);
    EXPECT_FALSE(s.used_amx());
    EXPECT_EQ(s.compute_isas(), std::vector<std::string>{"avx512_core_bf16"});
    EXPECT_DOUBLE_EQ(compute_share_satisfying(s, "avx512_core_amx"), 0.0);
    EXPECT_NEAR(compute_share_satisfying(s, "avx512_core_bf16"), 1.0, 1e-9);
    EXPECT_NEAR(compute_share_satisfying(s, "avx512_core"), 1.0, 1e-9);
    EXPECT_EQ(info_of(text).isa, "Intel AVX-512 with Intel DL Boost and bfloat16 support");
}

TEST(Verbose, NoComputeMeansNoShare) {
    const VerboseStats s = parse_verbose_text(
        "onednn_verbose,exec,cpu,reorder,jit:uni,undef,src_f32::blocked:ab:f0,,,4x4,0.1\n");
    EXPECT_FALSE(s.has_compute());
    EXPECT_DOUBLE_EQ(compute_share_satisfying(s, "avx512_core"), 0.0);
}

TEST(Verbose, OtherLinesAreIgnored) {
    for (const char *line : {"hello", "onednn_verbose,info,cpu,runtime:OpenMP",
                             "onednn_verbose,exec,cpu,matmul,brg:avx2,undef,x,,,1x1,notatime",
                             "onednn_verbose,v1,primitive,exec,cpu", "prefix onednn_verbose,exec,cpu,a,b,c,1"})
        EXPECT_FALSE(parse_verbose_line(line).has_value()) << line;
    auto e = parse_verbose_line("dnnl_verbose,exec,cpu,convolution,jit:avx2,forward_inference,,,,,0.5");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->isa, "avx2");
}

TEST(IsaCheck, FeatureHierarchy) {
    EXPECT_TRUE(isa_satisfies("avx512_core_amx", "avx512_core_bf16"));
    EXPECT_TRUE(isa_satisfies("avx512_core_amx", "avx512_core_amx"));
    EXPECT_FALSE(isa_satisfies("avx512_core_bf16", "avx512_core_amx"));
    EXPECT_FALSE(isa_satisfies("avx512_core_amx", "avx512_core_fp16"));
    EXPECT_TRUE(isa_satisfies("avx512_core_amx_fp16", "avx512_core_fp16"));
    EXPECT_TRUE(isa_satisfies("avx10_1_512_amx", "avx512_core_amx"));
    EXPECT_TRUE(isa_satisfies("avx512_core_vnni", "avx2"));
    EXPECT_FALSE(isa_satisfies("avx2", "avx512_core"));
    EXPECT_FALSE(isa_satisfies("avx2_vnni", "avx512_core_vnni"));
    EXPECT_TRUE(isa_satisfies("avx512_core_bf16_amx_bf16", "avx512_core_amx"));
    EXPECT_FALSE(isa_satisfies("", "sse41"));
    // Names oneDNN may add later are read by their parts.
    EXPECT_TRUE(isa_satisfies("avx10_2_512_amx_2", "avx512_core_amx"));
}

TEST(IsaCheck, NamesAndAliases) {
    EXPECT_EQ(canonical_isa("amx"), "avx512_core_amx");
    EXPECT_EQ(canonical_isa("AMX"), "avx512_core_amx");
    EXPECT_EQ(canonical_isa("avx512_bf16"), "avx512_core_bf16");
    EXPECT_EQ(canonical_isa("avx512_core_vnni"), "avx512_core_vnni");
    try {
        canonical_isa("amx2000");
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::usage);
        EXPECT_NE(std::string(e.what()).find("--require-isa amx2000"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("avx512_core_bf16"), std::string::npos);
    }
}

}  // namespace
}  // namespace ipex::launch
