#include "pybridge/runtime_ops.h"

#include <ATen/Parallel.h>

#include "base/errors.h"
#include "base/json_io.h"
#include "pybridge/op_guard.h"
#include "runtime/cpu_pool.h"

namespace ipex::pybridge {
namespace {

// The process's CPUs are read when the bridge loads, before Python pins any thread.
const bool kProcessCpusRead = !runtime::process_cpus().empty();

std::vector<int> cpu_ids(const JsonReader &read, const char *field) {
    std::vector<int> cpus;
    for (const auto &c : read.array(field)) {
        if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() > runtime::kMaxCpuId)
            throw_usage(std::string(field) + ": " + c.dump() + " is not a CPU id (0 to " +
                        std::to_string(runtime::kMaxCpuId) + ")");
        cpus.push_back(c.get<int>());
    }
    return cpus;
}

nlohmann::json info() {
    return {{"cpus", runtime::thread_cpus()},
            {"threads", at::get_num_threads()},
            {"process_cpus", runtime::process_cpus()}};
}

}  // namespace

std::string cpu_pool(const std::string &options_json) {
    return run_guarded_op("cpu_pool", [&] {
               (void)kProcessCpusRead;
               const nlohmann::json options = parse_options("cpu_pool", options_json, {"core_ids", "node_id"});
               const JsonReader read(options, "CPUPool");
               runtime::CpuPool pool;
               if (read.has("core_ids"))
                   pool = runtime::pool_of_cpus(cpu_ids(read, "core_ids"));
               else if (read.has("node_id"))
                   pool = runtime::pool_of_node(static_cast<int>(read.integer("node_id", 0, 1 << 16)));
               else
                   pool = runtime::process_pool();
               return nlohmann::json{{"cpus", pool.cpus}};
           })
        .dump();
}

std::string pin_thread(const std::string &options_json) {
    return run_guarded_op("pin", [&] {
               const nlohmann::json options = parse_options("pin", options_json, {"cpus", "threads"});
               const JsonReader read(options, "pin");
               const runtime::CpuPool pool = runtime::pool_of_cpus(cpu_ids(read, "cpus"));
               runtime::pin_current_thread(pool, static_cast<int>(read.integer_or("threads", 0, 0, 1 << 16)));
               return info();
           })
        .dump();
}

std::string thread_info() {
    return run_guarded_op("thread_info", [] { return info(); }).dump();
}

}  // namespace ipex::pybridge
