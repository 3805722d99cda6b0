#include "core/system_info.h"

#include <ATen/Parallel.h>
#include <hwloc.h>
#include <torch/version.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>

#include "base/cpu_features.h"

namespace ipex {
namespace {

struct Topology {
    int sockets = 0, numa_nodes = 0, cores = 0, pus = 0;
    int allowed_cores = 0;  // cores with at least one CPU in this process's affinity mask
};

// hwloc is loaded once per process: every command asks for the thread default at start.
const Topology &topology() {
    static const Topology cached = [] {
        Topology t;
        hwloc_topology_t topo;
        if (hwloc_topology_init(&topo) != 0) return t;
        if (hwloc_topology_load(topo) == 0) {
            t.sockets = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
            t.numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
            t.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
            t.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
            hwloc_cpuset_t allowed = hwloc_bitmap_alloc();
            if (hwloc_get_cpubind(topo, allowed, HWLOC_CPUBIND_PROCESS) == 0) {
                for (int i = 0; i < t.cores; ++i) {
                    hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, i);
                    if (hwloc_bitmap_intersects(core->cpuset, allowed)) ++t.allowed_cores;
                }
            }
            hwloc_bitmap_free(allowed);
        }
        hwloc_topology_destroy(topo);
        return t;
    }();
    return cached;
}

}  // namespace

std::string onednn_effective_isa() {
    using isa = dnnl::cpu_isa;
    switch (dnnl::get_effective_cpu_isa()) {
    case isa::sse41: return "sse41";
    case isa::avx: return "avx";
    case isa::avx2: return "avx2";
    case isa::avx2_vnni: return "avx2_vnni";
    case isa::avx512_mic: return "avx512_mic";
    case isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case isa::avx512_core: return "avx512_core";
    case isa::avx512_core_vnni: return "avx512_core_vnni";
    case isa::avx512_core_bf16: return "avx512_core_bf16";
    case isa::avx512_core_amx: return "avx512_core_amx";
    default: return "generic";
    }
}

int physical_cores() { return std::max(1, topology().cores); }

int default_threads() {
    if (const char *env = std::getenv("OMP_NUM_THREADS")) {
        const int n = std::atoi(env);
        if (n > 0) return n;
    }
    return topology().allowed_cores > 0 ? topology().allowed_cores : physical_cores();
}

SystemInfo system_info() {
    SystemInfo s;
    s.onednn_isa = onednn_effective_isa();
    const dnnl_version_t *v = dnnl::version();
    s.onednn_version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                       std::to_string(v->patch);
    s.torch_version = TORCH_VERSION;
    s.threads = default_threads();
    const Topology &t = topology();
    s.sockets = t.sockets;
    s.numa_nodes = t.numa_nodes;
    s.cores = t.cores;
    s.pus = t.pus;
    s.smt = t.cores > 0 ? std::max(1, t.pus / t.cores) : 1;
    return s;
}

nlohmann::json info_json() {
    const CpuFeatures &f = cpu_features();
    const SystemInfo s = system_info();
    nlohmann::json features = nlohmann::json::object();
    for (const auto &[name, present] : f.flags()) features[name] = present;
    return {
        {"cpu", {{"vendor", f.vendor}, {"model", f.model}}},
        {"features", features},
        {"amx", {{"usable", f.amx_tile && f.amx_permitted}, {"status", f.amx_status}}},
        {"onednn", {{"version", s.onednn_version}, {"isa", s.onednn_isa}}},
        {"libtorch", {{"version", s.torch_version}}},
        {"threads", s.threads},
        {"topology",
         {{"sockets", s.sockets},
          {"numa_nodes", s.numa_nodes},
          {"cores", s.cores},
          {"logical_cpus", s.pus},
          {"smt", s.smt}}},
    };
}

}  // namespace ipex
