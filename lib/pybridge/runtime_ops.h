// ipex_tool::cpu_pool, pin_thread and thread_info: `ipex_tool.cpu.runtime` in Python. Its
// streams and tasks are Python threads that pin themselves here (runtime/cpu_pool.h) before
// running a model; a TorchScript model's forward runs without the GIL, so streams run at once.
#pragma once

#include <string>

namespace ipex::pybridge {

// The CPUs of a pool: `options_json` {"core_ids": [..]} (checked against the process's CPUs),
// {"node_id": N} (the process's CPUs of that NUMA node) or {} (all the process's CPUs).
// Returns {"cpus": [..], "warnings"}.
std::string cpu_pool(const std::string &options_json);

// Pins the calling thread: {"cpus": [..], "threads": N (0: one per CPU)}. Returns what the
// thread has afterwards, as thread_info.
std::string pin_thread(const std::string &options_json);

// The calling thread's CPUs and OpenMP thread count, and the process's CPUs:
// {"cpus", "threads", "process_cpus"}.
std::string thread_info();

}  // namespace ipex::pybridge
