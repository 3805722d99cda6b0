// The machine as the launcher sees it: packages, NUMA nodes, physical cores with their
// hardware threads (PUs), P/E core kinds, and which CPUs this process may use. Loaded
// from hwloc for this machine, from an hwloc XML file, or from an hwloc synthetic
// description such as "package:2 numa:1 core:28 pu:2" (to plan for another machine).
#pragma once

#include <string>
#include <vector>

namespace ipex::launch {

struct Core {
    int id = 0;              // physical core id: hwloc logical index, unique machine-wide
    int package = 0;         // package (socket) logical index
    int numa_node = 0;       // OS index of the NUMA node holding the core
    bool efficiency = false; // an E-core on a hybrid CPU
    std::vector<int> cpus;   // OS processor ids of its usable hardware threads, ascending
};

struct Topology {
    std::string source;          // "this machine", "xml FILE", "synthetic DESC"
    bool this_system = true;     // false for XML/synthetic: plan only, never run
    int packages = 0;
    std::vector<int> numa_nodes; // OS indices of NUMA nodes with usable cores, ascending
    std::vector<Core> cores;     // usable cores (at least one usable CPU), by id
    int disallowed_cpus = 0;     // CPUs present but excluded by cgroup or affinity mask
    bool hybrid = false;         // both P- and E-cores are present

    int cpu_count() const;
    int max_smt() const;         // most hardware threads on any usable core
    const Core *core_of_cpu(int cpu) const;
};

// This machine, restricted to the CPUs the process may use (cgroup cpuset and the
// sched_getaffinity mask). Throws (exit 5) if hwloc fails.
Topology load_this_machine();

// An hwloc XML export (lstopo --of xml). Throws (exit 3) naming the file if it cannot
// be read or parsed.
Topology load_topology_xml(const std::string &path);

// An hwloc synthetic description. Throws (exit 2) naming --synthetic if hwloc rejects it.
Topology load_topology_synthetic(const std::string &description);

}  // namespace ipex::launch
