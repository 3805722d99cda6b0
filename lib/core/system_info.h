// Facts for `ipex-tool info`: ISA oneDNN dispatches to, library versions, threads, topology.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ipex {

struct SystemInfo {
    std::string onednn_isa;      // e.g. avx512_core_bf16, avx512_core_amx
    std::string onednn_version;  // e.g. 2.6.3
    std::string torch_version;
    int threads = 0;             // intra-op threads ipex-tool runs with (default_threads)
    int sockets = 0;
    int numa_nodes = 0;
    int cores = 0;
    int pus = 0;                 // logical processors
    int smt = 1;                 // PUs per core
};

SystemInfo system_info();

// oneDNN's name for the ISA its CPU engine dispatches to.
std::string onednn_effective_isa();

// Physical cores of the machine (hwloc); at least 1.
int physical_cores();

// The most intra-op threads any command takes (--threads): more is a usage error, not thousands
// of threads on a machine of a few cores.
constexpr int kMaxThreads = 4096;

// Threads a run should use by default: OMP_NUM_THREADS when set, else the physical cores
// among the CPUs this process may run on (affinity mask), at least 1.
int default_threads();

// Full `info` report: CPU, features, AMX permission, system info.
nlohmann::json info_json();

}  // namespace ipex
