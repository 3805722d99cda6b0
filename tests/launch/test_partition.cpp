// Partition tables: for each machine and option combination, the expected physical core
// list (and where it matters the CPU list) of every instance.
#include <gtest/gtest.h>

#include <functional>

#include "base/errors.h"
#include "base/log.h"
#include "launch/id_list.h"
#include "launch/partition.h"
#include "topology_fixtures.h"

namespace ipex::launch {
namespace {

using Lists = std::vector<std::string>;

Lists core_lists(const Partition &p) {
    Lists out;
    for (const auto &i : p.instances) out.push_back(format_id_list(i.cores));
    return out;
}

Lists cpu_lists(const Partition &p) {
    Lists out;
    for (const auto &i : p.instances) out.push_back(format_id_list(i.cpus));
    return out;
}

const Topology &two_sockets() {
    static const Topology t = load_topology_synthetic(testing::kTwoSocketsSmt);
    return t;
}
const Topology &one_socket() {
    static const Topology t = load_topology_synthetic(testing::kOneSocket56);
    return t;
}
const Topology &four_nodes() {
    static const Topology t = load_topology_synthetic(testing::kFourNodes);
    return t;
}

// 16 cores without SMT; CPUs in `e_cpus` are E-cores.
Topology hybrid(const std::vector<int> &e_cpus) {
    testing::TempDir dir;
    testing::write_hybrid_xml(dir.file("t.xml"), "package:1 core:16 pu:1", e_cpus);
    return load_topology_xml(dir.file("t.xml"));
}

struct Case {
    Case(const char *name, std::function<const Topology &()> topo,
         std::function<void(PartitionRequest &)> set, Lists cores, Lists cpus = {},
         bool warns_crossing = false, int unused = -1)
        : name(name), topo(std::move(topo)), set(std::move(set)), cores(std::move(cores)),
          cpus(std::move(cpus)), warns_crossing(warns_crossing), unused(unused) {}
    const char *name;
    std::function<const Topology &()> topo;
    std::function<void(PartitionRequest &)> set;
    Lists cores;
    Lists cpus;           // empty: not checked
    bool warns_crossing;
    int unused;           // -1: not checked
};

PartitionRequest req_with(const std::function<void(PartitionRequest &)> &set) {
    PartitionRequest r;
    set(r);
    return r;
}

std::vector<int> ids(const char *list) { return parse_id_list(list, "test"); }

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

class PartitionTable : public ::testing::TestWithParam<Case> {};

TEST_P(PartitionTable, GivesTheExpectedCores) {
    const Case &c = GetParam();
    const Partition p = partition(c.topo(), req_with(c.set));
    EXPECT_EQ(core_lists(p), c.cores);
    if (!c.cpus.empty()) {
        EXPECT_EQ(cpu_lists(p), c.cpus);
    }
    bool crossing = false;
    for (const auto &w : p.warnings) crossing = crossing || w.find("more than one NUMA node") != std::string::npos;
    EXPECT_EQ(crossing, c.warns_crossing);
    if (c.unused >= 0) {
        EXPECT_EQ(p.unused_slots, c.unused);
    }
}

// clang-format off
const Case kCases[] = {
    // 2 sockets x 28 cores x SMT 2, one NUMA node per socket.
    {"two_default", two_sockets, [](auto &) {}, {"0-55"}, {"0-55"}, false, 0},
    {"two_n2", two_sockets, [](auto &r) { r.ninstances = 2; }, {"0-27", "28-55"}, {"0-27", "28-55"}},
    {"two_n2_logical", two_sockets, [](auto &r) { r.ninstances = 2; r.use_logical_cores = true; },
     {"0-27", "28-55"}, {"0-27,56-83", "28-55,84-111"}},
    {"two_n3_even", two_sockets, [](auto &r) { r.ninstances = 3; }, {"0-17", "18-35", "36-53"}, {}, true, 2},
    {"two_n3_leftovers_first", two_sockets, [](auto &r) { r.ninstances = 3; r.ncores_per_instance = -1; },
     {"0-18", "19-37", "38-55"}, {}, true, 0},
    {"two_n3_bind", two_sockets, [](auto &r) { r.ninstances = 3; r.bind_numa_node = true; },
     {"0-13", "14-27", "28-41"}, {}, false, 14},
    {"two_n3_bind_scatter", two_sockets,
     [](auto &r) { r.ninstances = 3; r.bind_numa_node = true; r.strategy = Strategy::scatter; },
     {"0-13", "28-41", "14-27"}},
    {"two_n3_bind_leftovers_first", two_sockets,
     [](auto &r) { r.ninstances = 3; r.bind_numa_node = true; r.ncores_per_instance = -1; },
     {"0-13", "14-27", "28-55"}, {}, false, 0},
    {"two_4x_close", two_sockets, [](auto &r) { r.ninstances = 2; r.ncores_per_instance = 4; },
     {"0-3", "4-7"}},
    {"two_4x_scatter", two_sockets,
     [](auto &r) { r.ninstances = 2; r.ncores_per_instance = 4; r.strategy = Strategy::scatter; },
     {"0-3", "28-31"}},
    {"two_20_crosses", two_sockets, [](auto &r) { r.ninstances = 2; r.ncores_per_instance = 20; },
     {"0-19", "20-39"}, {}, true},
    {"two_20_bind", two_sockets,
     [](auto &r) { r.ninstances = 2; r.ncores_per_instance = 20; r.bind_numa_node = true; },
     {"0-19", "28-47"}},
    {"two_16_bind", two_sockets,
     [](auto &r) { r.ninstances = 2; r.ncores_per_instance = 16; r.bind_numa_node = true; },
     {"0-15", "28-43"}},
    {"two_throughput", two_sockets, [](auto &r) { r.throughput_mode = true; }, {"0-27", "28-55"}},
    {"two_nodes_list", two_sockets, [](auto &r) { r.nodes_list = ids("1"); r.ninstances = 2; },
     {"28-41", "42-55"}},
    {"two_cores_list", two_sockets, [](auto &r) { r.cores_list = ids("0-3,28-31"); r.ninstances = 2; },
     {"0-3", "28-31"}},
    {"two_cpus_list_logical", two_sockets,
     [](auto &r) { r.cpus_list = ids("0-3,56-59"); r.use_logical_cores = true; },
     {"0-3"}, {"0-3,56-59"}},
    {"two_cpus_list_siblings_only", two_sockets, [](auto &r) { r.cpus_list = ids("56-59"); },
     {"0-3"}, {"56-59"}},
    {"two_instance_idx", two_sockets,
     [](auto &r) { r.ncores_per_instance = 14; r.instance_idx = ids("1,3"); },
     {"14-27", "42-55"}},

    // 1 socket x 56 cores, no SMT.
    {"one_n8", one_socket, [](auto &r) { r.ninstances = 8; },
     {"0-6", "7-13", "14-20", "21-27", "28-34", "35-41", "42-48", "49-55"}},
    {"one_n5_even", one_socket, [](auto &r) { r.ninstances = 5; },
     {"0-10", "11-21", "22-32", "33-43", "44-54"}, {}, false, 1},
    {"one_n5_leftovers_first", one_socket, [](auto &r) { r.ninstances = 5; r.ncores_per_instance = -1; },
     {"0-11", "12-22", "23-33", "34-44", "45-55"}, {}, false, 0},
    {"one_n2_logical_is_noop", one_socket, [](auto &r) { r.ninstances = 2; r.use_logical_cores = true; },
     {"0-27", "28-55"}},
    {"one_10_each", one_socket, [](auto &r) { r.ncores_per_instance = 10; },
     {"0-9", "10-19", "20-29", "30-39", "40-49"}, {}, false, 6},

    // 2 sockets x 2 NUMA nodes x 8 cores x SMT 2.
    {"four_n4", four_nodes, [](auto &r) { r.ninstances = 4; }, {"0-7", "8-15", "16-23", "24-31"},
     {"0,2,4,6,8,10,12,14", "16,18,20,22,24,26,28,30", "32,34,36,38,40,42,44,46",
      "48,50,52,54,56,58,60,62"}},
    {"four_throughput_logical", four_nodes, [](auto &r) { r.throughput_mode = true; r.use_logical_cores = true; },
     {"0-7", "8-15", "16-23", "24-31"}, {"0-15", "16-31", "32-47", "48-63"}},
    {"four_scatter_2x4", four_nodes,
     [](auto &r) { r.ninstances = 2; r.ncores_per_instance = 4; r.strategy = Strategy::scatter; },
     {"0-3", "8-11"}},
    {"four_scatter_4x2", four_nodes,
     [](auto &r) { r.ninstances = 4; r.ncores_per_instance = 2; r.strategy = Strategy::scatter; },
     {"0-1", "8-9", "16-17", "24-25"}},
    {"four_n6_crosses", four_nodes, [](auto &r) { r.ninstances = 6; },
     {"0-4", "5-9", "10-14", "15-19", "20-24", "25-29"}, {}, true, 2},
    {"four_n6_bind", four_nodes, [](auto &r) { r.ninstances = 6; r.bind_numa_node = true; },
     {"0-3", "4-7", "8-11", "12-15", "16-19", "20-23"}, {}, false, 8},
    {"four_n6_bind_scatter", four_nodes,
     [](auto &r) { r.ninstances = 6; r.bind_numa_node = true; r.strategy = Strategy::scatter; },
     {"0-3", "8-11", "16-19", "24-27", "4-7", "12-15"}},
    {"four_nodes_list", four_nodes, [](auto &r) { r.nodes_list = ids("2-3"); r.ninstances = 2; },
     {"16-23", "24-31"}},
    {"four_latency", four_nodes, [](auto &r) { r.latency_mode = true; },
     {"0-3", "4-7", "8-11", "12-15", "16-19", "20-23", "24-27", "28-31"}},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Machines, PartitionTable, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(Partition, LatencyModeOnTwoSockets) {
    PartitionRequest r;
    r.latency_mode = true;
    const Partition p = partition(two_sockets(), r);
    ASSERT_EQ(p.instances.size(), 14u);
    EXPECT_EQ(format_id_list(p.instances[7].cores), "28-31");
    EXPECT_EQ(format_id_list(p.instances[13].cores), "52-55");
}

TEST(Partition, LatencyModeOnASmallMachineRunsOneInstance) {
    const Topology t = load_topology_synthetic("package:1 core:2 pu:1");
    PartitionRequest r;
    r.latency_mode = true;
    const Partition p = partition(t, r);
    ASSERT_EQ(p.instances.size(), 1u);
    EXPECT_EQ(format_id_list(p.instances[0].cores), "0-1");
    ASSERT_EQ(p.warnings.size(), 1u);
    EXPECT_NE(p.warnings[0].find("--latency-mode"), std::string::npos);
}

TEST(Partition, InstanceFieldsNameNodesAndPackages) {
    PartitionRequest r;
    r.ninstances = 4;
    const Partition p = partition(four_nodes(), r);
    EXPECT_EQ(p.ninstances, 4);
    EXPECT_EQ(p.instances[2].index, 2);
    EXPECT_EQ(p.instances[2].numa_nodes, std::vector<int>{2});
    EXPECT_EQ(p.instances[2].packages, std::vector<int>{1});
    EXPECT_EQ(p.slot_unit, "core");
}

TEST(Partition, ECoresAreLeftOutUnlessAskedFor) {
    const Topology t = hybrid(ids("8-15"));
    Partition p = partition(t, PartitionRequest{});
    EXPECT_EQ(core_lists(p), (Lists{"0-7"}));
    EXPECT_FALSE(p.instances[0].efficiency_cores);

    PartitionRequest two;
    two.ninstances = 2;
    EXPECT_EQ(core_lists(partition(t, two)), (Lists{"0-3", "4-7"}));

    two.use_e_cores = true;
    p = partition(t, two);
    EXPECT_EQ(core_lists(p), (Lists{"0-7", "8-15"}));
    EXPECT_FALSE(p.instances[0].efficiency_cores);
    EXPECT_TRUE(p.instances[1].efficiency_cores);
}

TEST(Partition, PCoresComeFirstEvenWhenECoresHaveLowerIds) {
    const Topology t = hybrid(ids("0-3"));
    PartitionRequest r;
    r.ninstances = 2;
    r.use_e_cores = true;
    EXPECT_EQ(core_lists(partition(t, r)), (Lists{"4-11", "0-3,12-15"}));
}

TEST(Partition, ListingAnECoreNeedsUseECores) {
    const Topology t = hybrid(ids("8-15"));
    PartitionRequest r;
    r.cores_list = ids("0-3,10");
    try {
        partition(t, r);
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::usage);
        EXPECT_NE(std::string(e.what()).find("E-core"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("--use-e-cores"), std::string::npos);
    }
    r.use_e_cores = true;
    EXPECT_EQ(core_lists(partition(t, r)), (Lists{"0-3,10"}));
}

// Impossible and conflicting requests: exit 2 with a message naming the flag.
struct BadCase {
    const char *name;
    std::function<const Topology &()> topo;
    std::function<void(PartitionRequest &)> set;
    const char *mentions;
};

void PrintTo(const BadCase &c, std::ostream *os) { *os << c.name; }

class PartitionErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(PartitionErrors, AreUsageErrorsNamingTheFlag) {
    const BadCase &c = GetParam();
    try {
        partition(c.topo(), req_with(c.set));
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::usage);
        EXPECT_NE(std::string(e.what()).find(c.mentions), std::string::npos) << e.what();
    }
}

// clang-format off
const BadCase kBadCases[] = {
    {"latency_and_throughput", two_sockets, [](auto &r) { r.latency_mode = r.throughput_mode = true; }, "--throughput-mode"},
    {"latency_and_ninstances", two_sockets, [](auto &r) { r.latency_mode = true; r.ninstances = 2; }, "--ninstances"},
    {"throughput_and_ncores", two_sockets, [](auto &r) { r.throughput_mode = true; r.ncores_per_instance = 4; }, "--ncores-per-instance"},
    {"cores_and_cpus_list", two_sockets, [](auto &r) { r.cores_list = ids("0"); r.cpus_list = ids("0"); }, "--cpus-list"},
    // Given is given: an explicit 0 (the even split) still conflicts. The counts' own ranges
    // are check_counts' (test_options.cpp).
    {"latency_and_explicit_ncores_0", two_sockets, [](auto &r) { r.latency_mode = true; r.ncores_per_instance = 0; }, "--ncores-per-instance"},
    {"too_many_cores", one_socket, [](auto &r) { r.ncores_per_instance = 57; }, "only 56"},
    {"too_many_instances", one_socket, [](auto &r) { r.ninstances = 57; }, "--ninstances 57"},
    {"product_too_big", one_socket, [](auto &r) { r.ninstances = 4; r.ncores_per_instance = 15; }, "needs 60"},
    {"smt_hint", two_sockets, [](auto &r) { r.ninstances = 60; }, "--use-logical-cores"},
    {"bind_too_big", four_nodes, [](auto &r) { r.ncores_per_instance = 9; r.bind_numa_node = true; }, "--bind-numa-node"},
    {"bind_too_many", two_sockets, [](auto &r) { r.ninstances = 3; r.ncores_per_instance = 20; r.bind_numa_node = true; }, "--bind-numa-node"},
    {"instance_idx_out_of_range", two_sockets, [](auto &r) { r.ninstances = 4; r.instance_idx = ids("2,4"); }, "--instance-idx 4"},
    {"unknown_cpu", two_sockets, [](auto &r) { r.cpus_list = ids("200"); }, "--cpus-list: CPU 200"},
    {"unknown_core", two_sockets, [](auto &r) { r.cores_list = ids("99"); }, "--cores-list: core 99"},
    {"unknown_node", four_nodes, [](auto &r) { r.nodes_list = ids("5"); }, "--nodes-list: NUMA node 5"},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Requests, PartitionErrors, ::testing::ValuesIn(kBadCases),
                         [](const auto &info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ipex::launch
