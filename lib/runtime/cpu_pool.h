// CPU pools: the logical CPUs a thread of the CPU runtime runs on, from a list, a NUMA node or
// what the process was given, and pinning the calling thread to one with an OpenMP team of its
// own. Streams (stream.h), the Python front end's ipex_tool.cpu.runtime and `bench --streams`
// sit on this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ipex::runtime {

// Upper bound on a CPU id (Linux's CPU_SETSIZE).
constexpr int kMaxCpuId = 1023;

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11} (sorted, unique); a malformed list or an id past
// kMaxCpuId is exit 3 naming `where`.
std::vector<int> parse_cpu_list(const std::string &text, const std::string &where);
// {0, 1, 2, 3, 8} -> "0-3,8".
std::string cpu_list_text(const std::vector<int> &cpus);

// The CPUs the calling thread may run on (sched_getaffinity).
std::vector<int> thread_cpus();
// The CPUs the process was given: the calling thread's at the first call (the library calls it
// when it loads, before anything is pinned).
const std::vector<int> &process_cpus();

struct CpuPool {
    std::vector<int> cpus;  // sorted, unique, all in process_cpus()
    std::string text() const { return cpu_list_text(cpus); }
};

// A pool of the given CPUs: exit 2 when it is empty or names a CPU the process may not use
// (listing them and the process's CPUs).
CpuPool pool_of_cpus(std::vector<int> cpus);
// The process's CPUs on NUMA node `node` (/sys/devices/system/node/nodeN/cpulist): exit 2 when
// the node does not exist or the process may use none of its CPUs.
CpuPool pool_of_node(int node);
CpuPool process_pool();

// `parts` pools of consecutive CPUs, as IPEX's MultiStreamModule cuts them: each gets
// size / parts CPUs and the first size % parts one more. Exit 2 unless 1 <= parts <= size.
std::vector<CpuPool> split_pool(const CpuPool &pool, int64_t parts);

// Pins the calling thread to `pool` and gives it an OpenMP team of `threads` (0: one per CPU of
// the pool). The team is the calling thread's alone: the thread count is set for this thread
// only (its OpenMP ICV, after ATen's per-thread lazy initialisation, so no later ATen call
// resets it), and the workers libgomp starts for it inherit the mask. Exit 2 when the kernel
// refuses the mask.
void pin_current_thread(const CpuPool &pool, int threads = 0);

}  // namespace ipex::runtime
