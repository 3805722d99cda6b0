// Pinning an instance: CPU affinity and a memory policy (libnuma's set_mempolicy) set in
// the child between fork and exec, or an external tool (numactl, taskset) put in front of
// the command. Everything the child needs is prepared before fork, so the child only
// makes system calls.
#pragma once

#include <string>
#include <vector>

#include "launch/partition.h"

namespace ipex::launch {

enum class TaskManager { auto_select, none, numactl, taskset };

struct PreparedBinding {
    bool affinity = false;
    std::vector<unsigned long> cpu_mask;   // sched_setaffinity mask
    bool membind = false;
    std::vector<unsigned long> node_mask;  // set_mempolicy(MPOL_BIND) node mask
    unsigned long max_node = 0;            // bits in node_mask, as set_mempolicy wants
};

// Direct binding for TaskManager::auto_select; nothing for the others.
PreparedBinding prepare_binding(const InstancePlacement &placement, TaskManager manager);

using SetMempolicyFn = long (*)(int mode, const unsigned long *nodemask, unsigned long maxnode);

struct BindOutcome {
    int affinity_errno = 0;  // non-zero: the CPU affinity could not be set (fatal)
    int membind_errno = 0;   // non-zero: memory policy refused, affinity alone applies
};

// Applies `binding` to the calling process. Async-signal-safe (used after fork).
// `set_mempolicy_fn` defaults to libnuma's set_mempolicy; tests pass a refusing one.
BindOutcome apply_binding(const PreparedBinding &binding, SetMempolicyFn set_mempolicy_fn = nullptr);

// Command prefix for numactl/taskset ({} for auto/none). `membind` false drops
// numactl's --membind (containers that refuse memory policies).
std::vector<std::string> task_manager_prefix(TaskManager manager,
                                             const InstancePlacement &placement, bool membind);

// Whether this process may set a memory policy (probes and restores the default).
bool memory_policy_allowed(const std::vector<int> &nodes);

}  // namespace ipex::launch
