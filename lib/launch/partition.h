// Splits the usable cores of a Topology into instances. Pure: same request, same
// placement, so tests check it against expected core lists on synthetic machines.
//
// Slots are physical cores (first usable hardware thread of each), or every hardware
// thread with use_logical_cores. Slots are ordered by NUMA node, then P-cores before
// E-cores, then core id, and an instance takes consecutive slots of that order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launch/topology.h"

namespace ipex::launch {

enum class Strategy { close, scatter };

struct PartitionRequest {
    // Empty when not given. Their ranges are the options' (check_counts in options.h).
    std::optional<int> ninstances;           // empty: derived from the other options (1 by default)
    std::optional<int> ncores_per_instance;  // >0 exact; 0 or empty even split, leftovers unused;
                                             // -1 even split, leftovers to the first instances
    Strategy strategy = Strategy::close;
    bool bind_numa_node = false;  // an instance never spans NUMA nodes
    bool use_logical_cores = false;
    bool use_e_cores = false;
    std::optional<std::vector<int>> cores_list;  // physical core ids
    std::optional<std::vector<int>> cpus_list;   // OS processor ids
    std::optional<std::vector<int>> nodes_list;  // NUMA node OS indices
    bool latency_mode = false;     // 4 cores per instance over all physical cores
    bool throughput_mode = false;  // one instance per NUMA node
    std::optional<std::vector<int>> instance_idx;  // run only these instances
};

struct InstancePlacement {
    int index = 0;
    std::vector<int> cpus;        // OS processor ids, ascending
    std::vector<int> cores;       // physical core ids, ascending
    std::vector<int> numa_nodes;  // ascending
    std::vector<int> packages;    // ascending
    bool efficiency_cores = false;  // holds at least one E-core
};

struct Partition {
    int ninstances = 0;                       // instances planned
    std::vector<InstancePlacement> instances; // the ones to run (after instance_idx)
    int unused_slots = 0;                     // usable slots no instance got
    std::string slot_unit;                    // "core" or "logical CPU"
    std::vector<std::string> warnings;
};

// Throws Error(usage) for conflicting or impossible requests, naming the flags.
Partition partition(const Topology &topo, const PartitionRequest &req);

}  // namespace ipex::launch
