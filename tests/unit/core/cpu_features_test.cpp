#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "base/cpu_features.h"

namespace {

std::set<std::string> proc_cpuinfo_flags() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("flags", 0) == 0) {
            std::istringstream ss(line.substr(line.find(':') + 1));
            std::set<std::string> flags;
            std::string f;
            while (ss >> f) flags.insert(f);
            return flags;
        }
    }
    return {};
}

}  // namespace

TEST(CpuFeatures, AgreeWithTheKernel) {
    const auto flags = proc_cpuinfo_flags();
    if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
    const auto &f = ipex::cpu_features();
    for (const auto &[name, present] : f.flags()) {
        EXPECT_EQ(present, flags.count(name) > 0) << name;
    }
    EXPECT_FALSE(f.model.empty());
    if (!f.amx_tile) EXPECT_FALSE(f.amx_permitted);
}
