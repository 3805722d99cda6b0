#include <gtest/gtest.h>
#include <numaif.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "launch/binding.h"

namespace ipex::launch {
namespace {

InstancePlacement placement(std::vector<int> cpus, std::vector<int> nodes) {
    InstancePlacement p;
    p.cpus = std::move(cpus);
    p.numa_nodes = std::move(nodes);
    return p;
}

long refuse_mempolicy(int, const unsigned long *, unsigned long) {
    errno = EPERM;
    return -1;
}

// Runs fn in a child (binding changes the calling process) and returns its exit code.
template <typename Fn>
int in_child(Fn fn) {
    const pid_t pid = fork();
    if (pid == 0) _exit(fn());
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(Binding, PreparedMasks) {
    const PreparedBinding b = prepare_binding(placement({1, 3, 70}, {0, 2}), TaskManager::auto_select);
    ASSERT_TRUE(b.affinity);
    ASSERT_EQ(b.cpu_mask.size(), 2u);
    EXPECT_EQ(b.cpu_mask[0], (1UL << 1) | (1UL << 3));
    EXPECT_EQ(b.cpu_mask[1], 1UL << (70 - 64));
    ASSERT_TRUE(b.membind);
    EXPECT_EQ(b.node_mask, std::vector<unsigned long>{0b101UL});
    EXPECT_EQ(b.max_node, 65UL);
}

TEST(Binding, OtherManagersBindNothingThemselves) {
    for (auto m : {TaskManager::none, TaskManager::numactl, TaskManager::taskset}) {
        const PreparedBinding b = prepare_binding(placement({0}, {0}), m);
        EXPECT_FALSE(b.affinity);
        EXPECT_FALSE(b.membind);
    }
}

TEST(Binding, AppliesAffinityAndMemoryPolicy) {
    const PreparedBinding b = prepare_binding(placement({0}, {0}), TaskManager::auto_select);
    EXPECT_EQ(in_child([&] {
                  const BindOutcome out = apply_binding(b);
                  if (out.affinity_errno || out.membind_errno) return 1;
                  cpu_set_t mask;
                  sched_getaffinity(0, sizeof(mask), &mask);
                  if (CPU_COUNT(&mask) != 1 || !CPU_ISSET(0, &mask)) return 2;
                  int mode = -1;
                  unsigned long nodes[16] = {};
                  if (get_mempolicy(&mode, nodes, 16 * 64, nullptr, 0) != 0) return 3;
                  return mode == MPOL_BIND && nodes[0] == 1UL ? 0 : 4;
              }),
              0);
}

TEST(Binding, RefusedMemoryPolicyFallsBackToAffinityAlone) {
    const PreparedBinding b = prepare_binding(placement({0}, {0}), TaskManager::auto_select);
    EXPECT_EQ(in_child([&] {
                  const BindOutcome out = apply_binding(b, refuse_mempolicy);
                  if (out.affinity_errno != 0) return 1;
                  if (out.membind_errno != EPERM) return 2;
                  cpu_set_t mask;
                  sched_getaffinity(0, sizeof(mask), &mask);
                  return CPU_COUNT(&mask) == 1 && CPU_ISSET(0, &mask) ? 0 : 3;
              }),
              0);
}

TEST(Binding, ImpossibleAffinityIsReported) {
    const PreparedBinding b = prepare_binding(placement({1000}, {0}), TaskManager::auto_select);
    EXPECT_EQ(in_child([&] { return apply_binding(b).affinity_errno == EINVAL ? 0 : 1; }), 0);
}

TEST(Binding, ExternalToolPrefixes) {
    const auto p = placement({0, 1, 2, 3, 8}, {0, 1});
    EXPECT_EQ(task_manager_prefix(TaskManager::numactl, p, true),
              (std::vector<std::string>{"numactl", "--physcpubind=0-3,8", "--membind=0-1", "--"}));
    EXPECT_EQ(task_manager_prefix(TaskManager::numactl, p, false),
              (std::vector<std::string>{"numactl", "--physcpubind=0-3,8", "--"}));
    EXPECT_EQ(task_manager_prefix(TaskManager::taskset, p, true),
              (std::vector<std::string>{"taskset", "--cpu-list", "0-3,8"}));
    EXPECT_TRUE(task_manager_prefix(TaskManager::auto_select, p, true).empty());
    EXPECT_TRUE(task_manager_prefix(TaskManager::none, p, true).empty());
}

}  // namespace
}  // namespace ipex::launch
