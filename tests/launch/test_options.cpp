// The count options' one rule (check_counts): a count given is 1 or more, never taken for
// "not given"; --ncores-per-instance also takes its two split modes.
#include <gtest/gtest.h>

#include "base/errors.h"
#include "base/log.h"
#include "launch/options.h"

namespace ipex::launch {
namespace {

// The usage error `opts` gets from validate(), "" when none.
std::string usage_error(const LaunchOptions &opts, void (*check)(const LaunchOptions &) = validate) {
    try {
        check(opts);
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::usage) << e.what();
        return e.what();
    }
    return "";
}

TEST(CountOptions, EveryCountFlagRefusesZeroAndNegativeNamingTheFlag) {
    ASSERT_EQ(count_options().size(), 4u);
    for (const auto &c : count_options()) {
        for (int bad : {0, -1, -2, -2147483647}) {
            if (c.modes.count(bad)) continue;
            LaunchOptions o;
            o.*c.field = bad;
            const std::string msg = usage_error(o, check_counts);
            EXPECT_EQ(msg.rfind(std::string(c.flag) + " " + std::to_string(bad) + ": takes a whole number of 1 or more",
                                0),
                      0u)
                << msg;
            EXPECT_NE(msg.find("leave it out for the default"), std::string::npos) << msg;
        }
        LaunchOptions o;
        o.*c.field = 1;
        EXPECT_EQ(usage_error(o, check_counts), "") << c.flag;
    }
}

TEST(CountOptions, NcoresPerInstanceKeepsItsTwoSplitModes) {
    LaunchOptions o;
    for (int mode : {0, -1}) {
        o.ncores_per_instance = mode;
        EXPECT_EQ(usage_error(o), "") << mode;
    }
    o.ncores_per_instance = -2;
    const std::string msg = usage_error(o);
    EXPECT_NE(msg.find("--ncores-per-instance -2: takes a whole number of 1 or more, or 0 (even split, leftovers "
                       "unused), or -1 (even split, leftovers to the first instances)"),
              std::string::npos)
        << msg;
}

TEST(CountOptions, LeftOutIsNotZero) {
    LaunchOptions o;
    EXPECT_FALSE(o.multi_node());
    o.nnodes = 1;
    EXPECT_TRUE(o.multi_node());
    // An explicit --nnodes 0 used to plan every host of the hostfile; now it is refused
    // before anything reads the file, in both entry points.
    o.hostfile = "hosts";
    o.nnodes = 0;
    EXPECT_NE(usage_error(o, validate_multi_node).find("--nnodes 0"), std::string::npos);
    o.nnodes.reset();
    o.nprocs_per_node = 0;
    EXPECT_NE(usage_error(o, validate_multi_node).find("--nprocs-per-node 0"), std::string::npos);
    // Given at all, --ninstances conflicts with a multi-node run, whatever its value.
    o.nprocs_per_node.reset();
    o.ninstances = 1;
    EXPECT_NE(usage_error(o, validate_multi_node).find("drop --ninstances"), std::string::npos);
}

TEST(MasterAddr, FollowsTheHostNameRule) {
    LaunchOptions o;
    o.hostfile = "hosts";
    for (const char *good : {"node0", "10.0.0.1", "fd00::1", "::1", "a-b.example.org"}) {
        o.master_addr = good;
        EXPECT_EQ(usage_error(o, validate_multi_node), "") << good;
    }
    for (const char *bad : {"-oProxyCommand=x", "node_0", "[::1]", "a b", "10.0.0.256", "a..b", "x;rm"}) {
        o.master_addr = bad;
        const std::string msg = usage_error(o, validate_multi_node);
        EXPECT_EQ(msg.rfind("--master-addr '", 0), 0u) << bad << ": " << msg;
    }
}

}  // namespace
}  // namespace ipex::launch
