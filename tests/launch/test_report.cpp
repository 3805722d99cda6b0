#include <gtest/gtest.h>

#include "launch/report.h"

namespace ipex::launch {
namespace {

InstanceOutcome outcome(int index, const std::string &verbose_text) {
    InstanceOutcome o;
    o.index = index;
    o.pid = 100 + index;
    o.exit_code = 0;
    o.verbose = parse_verbose_text(verbose_text);
    return o;
}

const char *kAmxLine =
    "onednn_verbose,exec,cpu,matmul,brg:avx512_core_amx,undef,src_bf16::blocked:ab:f0,,,8x8:8x8,3.0\n";
const char *kBf16Line =
    "onednn_verbose,exec,cpu,matmul,brg:avx512_core_bf16,undef,src_bf16::blocked:ab:f0,,,8x8:8x8,1.0\n";

TEST(Report, ShellJoinQuotesWhatAShellWouldSplit) {
    EXPECT_EQ(shell_join({"python3", "-u", "a b.py", "it's", "x=1", ""}),
              "python3 -u 'a b.py' 'it'\\''s' x=1 ''");
}

TEST(Report, IsaCheckPassesAndFailsPerInstance) {
    const std::vector<InstanceOutcome> outcomes{outcome(0, std::string(kAmxLine) + kBf16Line),
                                                outcome(1, kBf16Line), outcome(2, "")};
    IsaCheck strict = check_isa(outcomes, "avx512_core_amx", 0.9);
    EXPECT_FALSE(strict.ok);
    EXPECT_EQ(strict.passed, (std::vector<bool>{false, false, false}));
    EXPECT_NEAR(strict.shares[0], 0.75, 1e-6);
    EXPECT_NE(strict.message.find("instance 1 ran 0.0% on it (avx512_core_bf16)"), std::string::npos)
        << strict.message;
    EXPECT_NE(strict.message.find("instance 2 ran no oneDNN convolution/matmul"), std::string::npos);

    IsaCheck lenient = check_isa({outcomes[0]}, "avx512_core_amx", 0.7);
    EXPECT_TRUE(lenient.ok);
    EXPECT_TRUE(lenient.message.empty());

    IsaCheck bf16 = check_isa({outcomes[0], outcomes[1]}, "avx512_core_bf16", 0.9);
    EXPECT_TRUE(bf16.ok);
}

TEST(Report, VerboseTableShowsKernelsSharesAndAmx) {
    const std::vector<InstanceOutcome> outcomes{outcome(0, std::string(kAmxLine) + kBf16Line),
                                                outcome(1, "")};
    const std::string text = verbose_text(outcomes, check_isa(outcomes, "avx512_core_amx", 0.5));
    EXPECT_NE(text.find("oneDNN, instance 0: AMX: yes"), std::string::npos) << text;
    EXPECT_NE(text.find("oneDNN, instance 1: AMX: no"), std::string::npos);
    EXPECT_NE(text.find("brg:avx512_core_amx"), std::string::npos);
    EXPECT_NE(text.find("75.0%"), std::string::npos);
    EXPECT_NE(text.find("no oneDNN primitive ran"), std::string::npos);
    EXPECT_NE(text.find("NOT MET"), std::string::npos);
}

TEST(Report, SummaryTableHasOneRowPerInstance) {
    LaunchPlan plan;
    for (int i = 0; i < 2; ++i) {
        InstancePlan ip;
        ip.placement.index = i;
        ip.placement.cpus = {i * 4, i * 4 + 1, i * 4 + 2, i * 4 + 3};
        ip.placement.cores = ip.placement.cpus;
        ip.placement.numa_nodes = {i};
        plan.instances.push_back(ip);
    }
    std::vector<InstanceOutcome> outcomes{outcome(0, ""), outcome(1, "")};
    outcomes[1].exit_code = -1;
    outcomes[1].signal = 15;
    outcomes[0].peak_rss_kib = 3 * 1024;
    outcomes[0].wall_seconds = 1.5;
    const std::string text = summary_text(plan, outcomes);
    EXPECT_NE(text.find("instance  cpus"), std::string::npos) << text;
    EXPECT_NE(text.find("4-7"), std::string::npos);
    EXPECT_NE(text.find("signal 15 (SIGTERM)"), std::string::npos);
    EXPECT_NE(text.find("1.500 s"), std::string::npos);
    EXPECT_NE(text.find("3.0 MiB"), std::string::npos);
    EXPECT_NE(text.find("exit 0"), std::string::npos);
}

TEST(Report, ResultsJsonCarriesStatusPerInstance) {
    LaunchPlan plan;
    InstancePlan ip;
    ip.placement.cpus = {0};
    plan.instances.push_back(ip);
    std::vector<InstanceOutcome> outcomes{outcome(0, kAmxLine)};
    outcomes[0].exit_code = 3;
    const auto j = results_json(plan, outcomes, check_isa(outcomes, "avx512_core_amx", 0.9), true);
    EXPECT_EQ(j["ok"], false);  // the ISA is met, the exit code is not
    EXPECT_EQ(j["instances"][0]["exit_code"], 3);
    EXPECT_EQ(j["instances"][0]["onednn"]["amx"], true);
    EXPECT_EQ(j["require_isa"]["ok"], true);
    EXPECT_TRUE(j["instances"][0]["signal"].is_null());
}

}  // namespace
}  // namespace ipex::launch
