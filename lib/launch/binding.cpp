#include "launch/binding.h"

#include <numaif.h>
#include <sched.h>

#include <cerrno>
#include <climits>

#include "launch/id_list.h"

namespace ipex::launch {
namespace {

constexpr size_t kBitsPerWord = sizeof(unsigned long) * CHAR_BIT;

std::vector<unsigned long> make_mask(const std::vector<int> &ids) {
    int max_id = 0;
    for (int id : ids) max_id = id > max_id ? id : max_id;
    std::vector<unsigned long> mask(static_cast<size_t>(max_id) / kBitsPerWord + 1, 0UL);
    for (int id : ids)
        mask[static_cast<size_t>(id) / kBitsPerWord] |= 1UL << (static_cast<size_t>(id) % kBitsPerWord);
    return mask;
}

long libnuma_set_mempolicy(int mode, const unsigned long *nodemask, unsigned long maxnode) {
    return set_mempolicy(mode, nodemask, maxnode);
}

}  // namespace

PreparedBinding prepare_binding(const InstancePlacement &placement, TaskManager manager) {
    PreparedBinding b;
    if (manager != TaskManager::auto_select) return b;
    b.affinity = !placement.cpus.empty();
    b.cpu_mask = make_mask(placement.cpus);
    b.membind = !placement.numa_nodes.empty();
    b.node_mask = make_mask(placement.numa_nodes);
    // The kernel reads max_node - 1 bits.
    b.max_node = b.node_mask.size() * kBitsPerWord + 1;
    return b;
}

BindOutcome apply_binding(const PreparedBinding &binding, SetMempolicyFn set_mempolicy_fn) {
    BindOutcome out;
    if (binding.affinity) {
        const size_t bytes = binding.cpu_mask.size() * sizeof(unsigned long);
        if (sched_setaffinity(0, bytes, reinterpret_cast<const cpu_set_t *>(binding.cpu_mask.data())) != 0)
            out.affinity_errno = errno ? errno : EINVAL;
    }
    if (binding.membind && out.affinity_errno == 0) {
        SetMempolicyFn fn = set_mempolicy_fn ? set_mempolicy_fn : libnuma_set_mempolicy;
        errno = 0;
        if (fn(MPOL_BIND, binding.node_mask.data(), binding.max_node) != 0)
            out.membind_errno = errno ? errno : EPERM;
    }
    return out;
}

std::vector<std::string> task_manager_prefix(TaskManager manager,
                                             const InstancePlacement &placement, bool membind) {
    const std::string cpus = format_id_list(placement.cpus);
    if (manager == TaskManager::numactl) {
        std::vector<std::string> prefix{"numactl", "--physcpubind=" + cpus};
        if (membind) prefix.push_back("--membind=" + format_id_list(placement.numa_nodes));
        prefix.push_back("--");
        return prefix;
    }
    if (manager == TaskManager::taskset) return {"taskset", "--cpu-list", cpus};
    return {};
}

bool memory_policy_allowed(const std::vector<int> &nodes) {
    if (nodes.empty()) return true;
    const auto mask = make_mask(nodes);
    if (set_mempolicy(MPOL_BIND, mask.data(), mask.size() * kBitsPerWord + 1) != 0) return false;
    set_mempolicy(MPOL_DEFAULT, nullptr, 0);
    return true;
}

}  // namespace ipex::launch
