#include "runtime/cpu_pool.h"

#include <ATen/Parallel.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/errors.h"

namespace ipex::runtime {
namespace {

int parse_id(const std::string &item, const std::string &where) {
    if (item.empty() || item.size() > 4 || item.find_first_not_of("0123456789") != std::string::npos)
        throw_bad_input(where + ": '" + item + "' is not a CPU id");
    const int id = std::stoi(item);
    if (id > kMaxCpuId) throw_bad_input(where + ": CPU " + item + " is past " + std::to_string(kMaxCpuId));
    return id;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string &text, const std::string &where) {
    std::vector<int> cpus;
    std::stringstream s(text);
    std::string item;
    while (std::getline(s, item, ',')) {
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.erase(0, 1);
        if (item.empty()) continue;
        const size_t dash = item.find('-');
        const int lo = parse_id(item.substr(0, dash), where);
        const int hi = dash == std::string::npos ? lo : parse_id(item.substr(dash + 1), where);
        if (hi < lo) throw_bad_input(where + ": '" + item + "' is an empty range");
        for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

std::string cpu_list_text(const std::vector<int> &cpus) {
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        out += (out.empty() ? "" : ",") + std::to_string(cpus[i]);
        if (j > i) out += "-" + std::to_string(cpus[j]);
        i = j + 1;
    }
    return out;
}

std::vector<int> thread_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) throw_internal(std::string("sched_getaffinity: ") + std::strerror(errno));
    std::vector<int> cpus;
    for (int c = 0; c <= kMaxCpuId && c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

const std::vector<int> &process_cpus() {
    static const std::vector<int> cpus = thread_cpus();
    return cpus;
}

CpuPool pool_of_cpus(std::vector<int> cpus) {
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    if (cpus.empty()) throw_usage("a CPU pool needs at least one CPU");
    const std::vector<int> &allowed = process_cpus();
    std::vector<int> refused;
    for (int c : cpus)
        if (!std::binary_search(allowed.begin(), allowed.end(), c)) refused.push_back(c);
    if (!refused.empty())
        throw_usage("CPU " + cpu_list_text(refused) + " is not one this process may use (it may use " +
                    cpu_list_text(allowed) + ")");
    return {std::move(cpus)};
}

CpuPool pool_of_node(int node) {
    const std::string path = "/sys/devices/system/node/node" + std::to_string(node) + "/cpulist";
    std::ifstream in(path);
    std::string text;
    if (node < 0 || !in || !std::getline(in, text))
        throw_usage("NUMA node " + std::to_string(node) + " does not exist (no " + path + ")");
    const std::vector<int> &allowed = process_cpus();
    std::vector<int> cpus;
    for (int c : parse_cpu_list(text, path))
        if (std::binary_search(allowed.begin(), allowed.end(), c)) cpus.push_back(c);
    if (cpus.empty())
        throw_usage("NUMA node " + std::to_string(node) + " has none of the CPUs this process may use (" +
                    cpu_list_text(allowed) + ")");
    return {std::move(cpus)};
}

CpuPool process_pool() { return {process_cpus()}; }

std::vector<CpuPool> split_pool(const CpuPool &pool, int64_t parts) {
    const auto size = static_cast<int64_t>(pool.cpus.size());
    if (parts < 1 || parts > size)
        throw_usage(std::to_string(parts) + " streams on " + std::to_string(size) + " CPUs (" + pool.text() +
                    "): give 1 to " + std::to_string(size));
    std::vector<CpuPool> out;
    size_t start = 0;
    for (int64_t i = 0; i < parts; ++i) {
        const size_t n = static_cast<size_t>(size / parts + (i < size % parts ? 1 : 0));
        out.push_back({std::vector<int>(pool.cpus.begin() + static_cast<long>(start),
                                        pool.cpus.begin() + static_cast<long>(start + n))});
        start += n;
    }
    return out;
}

void pin_current_thread(const CpuPool &pool, int threads) {
    // ATen sets each thread's OpenMP thread count from a process-wide value the first time the
    // thread runs a parallel op; do that now so the count set below stays. The OpenMP runtime
    // initializes its state for this thread on these first calls, and LLVM's binds the thread to
    // the process's CPUs then: pin after them.
    at::internal::lazy_init_num_threads();
    omp_set_num_threads(threads > 0 ? threads : static_cast<int>(pool.cpus.size()));
    (void)omp_get_max_threads();
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : pool.cpus) CPU_SET(c, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        throw_usage("cannot pin a thread to CPUs " + pool.text() + ": " + std::strerror(errno));
}

}  // namespace ipex::runtime
