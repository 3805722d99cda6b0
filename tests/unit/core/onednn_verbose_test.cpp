#include <gtest/gtest.h>

#include "base/isa_check.h"
#include "base/onednn_verbose.h"

using ipex::parse_verbose_line;
using ipex::parse_verbose_text;

TEST(OnednnVerbose, ParsesVersion2ExecLines) {
    auto e = parse_verbose_line(
        "onednn_verbose,exec,cpu,convolution,brgconv:avx512_core_bf16,forward_training,src_bf16::blocked:acdb:f0 "
        "dst_bf16::blocked:acdb:f0,attr-scratchpad:user ,alg:convolution_direct,mb16_ic64oc64_ih56oh56kh3sh1dh0ph1,19.376");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind, "convolution");
    EXPECT_EQ(e->impl, "brgconv:avx512_core_bf16");
    EXPECT_EQ(e->isa, "avx512_core_bf16");
    EXPECT_DOUBLE_EQ(e->ms, 19.376);
    auto old = parse_verbose_line("dnnl_verbose,exec,cpu,inner_product,gemm:jit,forward_inference,,,mb2ic4oc3,0.01");
    ASSERT_TRUE(old);
    EXPECT_EQ(old->isa, "");
}

TEST(OnednnVerbose, ParsesVersion3LinesWithAndWithoutTimestamp) {
    auto e = parse_verbose_line(
        "onednn_verbose,primitive,exec,cpu,matmul,brg:avx512_core_amx,undef,src_bf16::blocked:ab::f0,,,8x64:64x32,0.5");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind, "matmul");
    EXPECT_EQ(e->isa, "avx512_core_amx");
    auto t = parse_verbose_line(
        "onednn_verbose,1693412345.123,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core_amx_fp16,forward_inference,,,,mb1,2.25");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->isa, "avx512_core_amx_fp16");
    EXPECT_DOUBLE_EQ(t->ms, 2.25);
}

TEST(OnednnVerbose, IgnoresOtherLines) {
    EXPECT_FALSE(parse_verbose_line("onednn_verbose,info,oneDNN v2.6.3 (commit N/A)"));
    EXPECT_FALSE(parse_verbose_line("onednn_verbose,create:cache_miss,cpu,convolution,jit:avx2,fwd,,,,0.1"));
    EXPECT_FALSE(parse_verbose_line("hello,exec,cpu,convolution,jit:avx2,a,b,c,1.0"));
    EXPECT_FALSE(parse_verbose_line("onednn_verbose,exec,cpu,convolution,jit:avx2,a,b,c,notanumber"));
    EXPECT_FALSE(parse_verbose_line("onednn_verbose,exec,cpu"));
    // A time oneDNN would never print: negative, infinite or not a number.
    EXPECT_FALSE(parse_verbose_line("onednn_verbose,exec,cpu,matmul,brg:avx512_core_bf16,undef,,,,8x64:64x32,-.25"));
    EXPECT_FALSE(parse_verbose_line("onednn_verbose,exec,cpu,matmul,brg:avx512_core_bf16,undef,,,,8x64:64x32,inf"));
    EXPECT_FALSE(parse_verbose_line("onednn_verbose,exec,cpu,matmul,brg:avx512_core_bf16,undef,,,,8x64:64x32,nan"));
    EXPECT_FALSE(parse_verbose_line(""));
}

TEST(OnednnVerbose, SharesComputeTimeByIsa) {
    const std::string text =
        "program output line\n"
        "onednn_verbose,exec,cpu,convolution,brgconv:avx512_core_amx,forward_inference,,,,mb1,3.0\n"
        "onednn_verbose,exec,cpu,convolution,jit:avx512_core,forward_inference,,,,mb1,1.0\n"
        "onednn_verbose,exec,cpu,reorder,jit:uni,undef,,,,2x2,50.0\n";
    auto stats = parse_verbose_text(text);
    EXPECT_EQ(stats.exec_lines, 3);
    EXPECT_TRUE(stats.used_amx());
    EXPECT_NEAR(ipex::compute_share_satisfying(stats, "avx512_core_amx"), 0.75, 1e-6);
    EXPECT_NEAR(ipex::compute_share_satisfying(stats, "avx512_core"), 1.0, 1e-6);  // amx implies avx512_core
    EXPECT_EQ(stats.compute_isas().front(), "avx512_core_amx");
    auto none = parse_verbose_text("onednn_verbose,exec,cpu,reorder,jit:uni,undef,,,,2x2,5.0\n");
    EXPECT_FALSE(none.has_compute());
    EXPECT_FALSE(none.used_amx());
    EXPECT_EQ(ipex::compute_share_satisfying(none, "avx512_core_amx"), 0.0);
}

TEST(OnednnVerbose, ANegativeTimeCannotPushAShareOutsideZeroToOne) {
    // Found by fuzz_spec: a line with time -0.25 beside one with 0.5 gave a share of 2.
    const std::string text =
        "onednn_verbose,exec,cpu,convolution,brgconv:avx512_core_amx,forward_inference,,,,mb1_ic3oc64,0.5\n"
        "onednn_verbose,primitive,exec,cpu,matmul,brg:avx512_core_bf16,undef,,,,8x64:64x32,-.25\n";
    auto stats = parse_verbose_text(text);
    EXPECT_EQ(stats.exec_lines, 1);
    EXPECT_NEAR(ipex::compute_share_satisfying(stats, "avx512_core_amx"), 1.0, 1e-9);
}
