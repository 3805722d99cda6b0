#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/log.h"
#include "launch/topology.h"
#include "topology_fixtures.h"

namespace ipex::launch {
namespace {

using testing::TempDir;

TEST(Topology, SyntheticTwoSocketsWithSmt) {
    const Topology t = load_topology_synthetic(testing::kTwoSocketsSmt);
    EXPECT_FALSE(t.this_system);
    EXPECT_EQ(t.packages, 2);
    EXPECT_EQ(t.numa_nodes, (std::vector<int>{0, 1}));
    ASSERT_EQ(t.cores.size(), 56u);
    EXPECT_EQ(t.cpu_count(), 112);
    EXPECT_EQ(t.max_smt(), 2);
    EXPECT_FALSE(t.hybrid);
    EXPECT_EQ(t.cores[0].cpus, (std::vector<int>{0, 56}));
    EXPECT_EQ(t.cores[27].numa_node, 0);
    EXPECT_EQ(t.cores[28].numa_node, 1);
    EXPECT_EQ(t.cores[28].package, 1);
    EXPECT_EQ(t.cores[55].cpus, (std::vector<int>{55, 111}));
    ASSERT_NE(t.core_of_cpu(84), nullptr);
    EXPECT_EQ(t.core_of_cpu(84)->id, 28);
    EXPECT_EQ(t.core_of_cpu(112), nullptr);
}

TEST(Topology, SyntheticFourNodes) {
    const Topology t = load_topology_synthetic(testing::kFourNodes);
    EXPECT_EQ(t.numa_nodes, (std::vector<int>{0, 1, 2, 3}));
    ASSERT_EQ(t.cores.size(), 32u);
    EXPECT_EQ(t.cores[8].numa_node, 1);
    EXPECT_EQ(t.cores[16].package, 1);
    EXPECT_EQ(t.cores[16].numa_node, 2);
    EXPECT_EQ(t.cores[3].cpus, (std::vector<int>{6, 7}));
}

TEST(Topology, BadSyntheticIsAUsageError) {
    try {
        load_topology_synthetic("package:two core:x");
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::usage);
        EXPECT_NE(std::string(e.what()).find("--synthetic"), std::string::npos);
    }
}

TEST(Topology, HybridXmlMarksECores) {
    TempDir dir;
    testing::write_hybrid_xml(dir.file("hybrid.xml"), "package:1 core:16 pu:1",
                              {8, 9, 10, 11, 12, 13, 14, 15});
    const Topology t = load_topology_xml(dir.file("hybrid.xml"));
    EXPECT_TRUE(t.hybrid);
    ASSERT_EQ(t.cores.size(), 16u);
    for (const auto &core : t.cores) EXPECT_EQ(core.efficiency, core.id >= 8) << core.id;
}

TEST(Topology, HybridByCoreTypeWhenEfficiencyIsUnknown) {
    TempDir dir;
    testing::write_hybrid_xml(dir.file("hybrid.xml"), "package:1 core:8 pu:1", {6, 7}, true);
    const Topology t = load_topology_xml(dir.file("hybrid.xml"));
    EXPECT_TRUE(t.hybrid);
    EXPECT_FALSE(t.cores[5].efficiency);
    EXPECT_TRUE(t.cores[6].efficiency);
}

TEST(Topology, MissingXmlIsBadInput) {
    try {
        load_topology_xml("/nonexistent/topo.xml");
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::bad_input);
        EXPECT_NE(std::string(e.what()).find("/nonexistent/topo.xml"), std::string::npos);
    }
}

TEST(Topology, CorruptXmlIsBadInput) {
    TempDir dir;
    testing::write_text(dir.file("bad.xml"), "<?xml version=\"1.0\"?><topology><object type=");
    try {
        load_topology_xml(dir.file("bad.xml"));
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::bad_input);
        EXPECT_NE(std::string(e.what()).find("lstopo"), std::string::npos) << e.what();
    }
}

TEST(Topology, ThisMachineHonoursTheAffinityMask) {
    // In a child, so the test process keeps its own mask.
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0) _exit(10);
        const Topology t = load_this_machine();
        if (!t.this_system) _exit(11);
        if (t.cpu_count() != 1 || t.cores.size() != 1) _exit(12);
        if (t.cores[0].cpus != std::vector<int>{0}) _exit(13);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Topology, ThisMachineMatchesTheKernelsCpuCount) {
    cpu_set_t mask;
    ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
    const Topology t = load_this_machine();
    EXPECT_EQ(t.cpu_count(), CPU_COUNT(&mask));
    EXPECT_GE(t.numa_nodes.size(), 1u);
}

}  // namespace
}  // namespace ipex::launch
