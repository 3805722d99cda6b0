#include "launch/topology.h"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/errors.h"
#include "base/log.h"

namespace ipex::launch {
namespace {

// Owns an hwloc topology handle.
class HwlocTopology {
public:
    HwlocTopology() {
        if (hwloc_topology_init(&topo_) != 0)
            throw_internal("hwloc_topology_init failed");
        // Caches and I/O devices are not needed for placement; skipping them is faster.
        hwloc_topology_set_cache_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_NONE);
        hwloc_topology_set_icache_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_NONE);
        hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_NONE);
    }
    ~HwlocTopology() { hwloc_topology_destroy(topo_); }
    HwlocTopology(const HwlocTopology &) = delete;
    HwlocTopology &operator=(const HwlocTopology &) = delete;
    hwloc_topology_t get() const { return topo_; }

private:
    hwloc_topology_t topo_ = nullptr;
};

// Owns an hwloc bitmap.
class Bitmap {
public:
    Bitmap() : map_(hwloc_bitmap_alloc()) {}
    explicit Bitmap(hwloc_const_bitmap_t src) : map_(hwloc_bitmap_dup(src)) {}
    ~Bitmap() { hwloc_bitmap_free(map_); }
    Bitmap(Bitmap &&other) noexcept : map_(other.map_) { other.map_ = nullptr; }
    Bitmap(const Bitmap &) = delete;
    Bitmap &operator=(const Bitmap &) = delete;
    Bitmap &operator=(Bitmap &&) = delete;
    hwloc_bitmap_t get() const { return map_; }

private:
    hwloc_bitmap_t map_;
};

std::vector<int> bitmap_ids(hwloc_const_bitmap_t map) {
    std::vector<int> ids;
    int id = -1;
    while ((id = hwloc_bitmap_next(map, id)) != -1) ids.push_back(id);
    return ids;
}

// OS indices of CPUs that belong to an E-core kind, empty unless the CPU is hybrid.
// With known efficiencies every kind below the most performant one counts as E;
// otherwise the kinds' CoreType info ("IntelAtom") decides.
Bitmap efficiency_cpus(hwloc_topology_t topo) {
    Bitmap ecpus;
    const int nr = hwloc_cpukinds_get_nr(topo, 0);
    if (nr < 2) return ecpus;
    struct Kind {
        Bitmap cpus;
        int efficiency = -1;
        bool atom = false;
    };
    std::vector<Kind> kinds(static_cast<size_t>(nr));
    int best = -1;
    for (int k = 0; k < nr; ++k) {
        auto &kind = kinds[static_cast<size_t>(k)];
        unsigned nr_infos = 0;
        struct hwloc_info_s *infos = nullptr;
        if (hwloc_cpukinds_get_info(topo, static_cast<unsigned>(k), kind.cpus.get(),
                                    &kind.efficiency, &nr_infos, &infos, 0) != 0)
            continue;
        for (unsigned i = 0; i < nr_infos; ++i)
            if (std::strcmp(infos[i].name, "CoreType") == 0 &&
                std::strcmp(infos[i].value, "IntelAtom") == 0)
                kind.atom = true;
        best = std::max(best, kind.efficiency);
    }
    for (const auto &kind : kinds) {
        const bool is_e = best >= 0 ? kind.efficiency < best : kind.atom;
        if (is_e) hwloc_bitmap_or(ecpus.get(), ecpus.get(), kind.cpus.get());
    }
    return ecpus;
}

int numa_node_of(hwloc_topology_t topo, hwloc_const_cpuset_t cpus) {
    const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
        hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
        if (!hwloc_bitmap_iszero(node->cpuset) && hwloc_bitmap_intersects(node->cpuset, cpus))
            return static_cast<int>(node->os_index);
    }
    return 0;
}

Topology extract(hwloc_topology_t topo, hwloc_const_cpuset_t usable, const std::string &source,
                 bool this_system) {
    Topology out;
    out.source = source;
    out.this_system = this_system;
    out.packages = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
    const Bitmap ecpus = efficiency_cpus(topo);

    // Machines without a Core level (some VMs) get one core per PU.
    hwloc_obj_type_t core_type = HWLOC_OBJ_CORE;
    if (hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) <= 0) core_type = HWLOC_OBJ_PU;
    const int ncores = hwloc_get_nbobjs_by_type(topo, core_type);
    bool any_p = false, any_e = false;
    for (int i = 0; i < ncores; ++i) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(topo, core_type, static_cast<unsigned>(i));
        Bitmap cpus(obj->cpuset);
        hwloc_bitmap_and(cpus.get(), cpus.get(), usable);
        if (hwloc_bitmap_iszero(cpus.get())) continue;
        Core core;
        core.id = static_cast<int>(obj->logical_index);
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
        core.package = pkg ? static_cast<int>(pkg->logical_index) : 0;
        core.numa_node = numa_node_of(topo, obj->cpuset);
        core.efficiency = hwloc_bitmap_intersects(obj->cpuset, ecpus.get());
        core.cpus = bitmap_ids(cpus.get());
        (core.efficiency ? any_e : any_p) = true;
        out.cores.push_back(core);
    }
    out.hybrid = any_p && any_e;
    for (const auto &core : out.cores) out.numa_nodes.push_back(core.numa_node);
    std::sort(out.numa_nodes.begin(), out.numa_nodes.end());
    out.numa_nodes.erase(std::unique(out.numa_nodes.begin(), out.numa_nodes.end()),
                         out.numa_nodes.end());
    const int all = hwloc_bitmap_weight(hwloc_topology_get_complete_cpuset(topo));
    out.disallowed_cpus = std::max(0, all - out.cpu_count());
    return out;
}

}  // namespace

int Topology::cpu_count() const {
    int n = 0;
    for (const auto &core : cores) n += static_cast<int>(core.cpus.size());
    return n;
}

int Topology::max_smt() const {
    size_t n = 0;
    for (const auto &core : cores) n = std::max(n, core.cpus.size());
    return static_cast<int>(n);
}

const Core *Topology::core_of_cpu(int cpu) const {
    for (const auto &core : cores)
        if (std::find(core.cpus.begin(), core.cpus.end(), cpu) != core.cpus.end()) return &core;
    return nullptr;
}

Topology load_this_machine() {
    HwlocTopology topo;
    // The launcher pays this on every start. Sysfs gives packages, cores, NUMA nodes and
    // CPU kinds; the x86 cpuid pass (which visits every CPU) and the distance and memory
    // attribute matrices add time and nothing the placement uses.
    hwloc_topology_set_components(topo.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    hwloc_topology_set_flags(topo.get(), HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS);
    for (hwloc_obj_type_t type : {HWLOC_OBJ_DIE, HWLOC_OBJ_MISC, HWLOC_OBJ_MEMCACHE})
        hwloc_topology_set_type_filter(topo.get(), type, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(topo.get()) != 0)
        throw_internal(std::string("hwloc could not read this machine's topology: ") +
                      std::strerror(errno));
    Bitmap usable(hwloc_topology_get_allowed_cpuset(topo.get()));
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
        Bitmap affinity;
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
            if (CPU_ISSET(cpu, &mask)) hwloc_bitmap_set(affinity.get(), static_cast<unsigned>(cpu));
        hwloc_bitmap_and(usable.get(), usable.get(), affinity.get());
    }
    return extract(topo.get(), usable.get(), "this machine", true);
}

Topology load_topology_xml(const std::string &path) {
    std::ifstream probe(path);
    if (!probe)
        throw_bad_input("--topology " + path + ": cannot read the file (" +
                        std::strerror(errno) + ")");
    HwlocTopology topo;
    if (hwloc_topology_set_xml(topo.get(), path.c_str()) != 0 ||
        hwloc_topology_load(topo.get()) != 0)
        throw_bad_input("--topology " + path +
                        ": not an hwloc XML topology (export one with: lstopo --of xml FILE)");
    Topology out = extract(topo.get(), hwloc_topology_get_allowed_cpuset(topo.get()),
                           "xml " + path, false);
    if (out.cores.empty())
        throw_bad_input("--topology " + path + ": the topology has no usable CPUs");
    return out;
}

Topology load_topology_synthetic(const std::string &description) {
    HwlocTopology topo;
    if (hwloc_topology_set_synthetic(topo.get(), description.c_str()) != 0 ||
        hwloc_topology_load(topo.get()) != 0)
        throw_usage("--synthetic '" + description +
                    "': hwloc cannot build this topology (write levels with counts, e.g. "
                    "\"package:2 numa:1 core:28 pu:2\")");
    return extract(topo.get(), hwloc_topology_get_allowed_cpuset(topo.get()),
                   "synthetic " + description, false);
}

}  // namespace ipex::launch
