#include "launch/options.h"

#include "launch/diagnostics.h"
#include "launch/id_list.h"
#include "launch/isa_check.h"

namespace ipex::launch {

const std::map<std::string, Strategy> &strategy_names() {
    static const std::map<std::string, Strategy> names{{"close", Strategy::close},
                                                       {"scatter", Strategy::scatter}};
    return names;
}

const std::map<std::string, TaskManager> &task_manager_names() {
    static const std::map<std::string, TaskManager> names{{"auto", TaskManager::auto_select},
                                                          {"none", TaskManager::none},
                                                          {"numactl", TaskManager::numactl},
                                                          {"taskset", TaskManager::taskset}};
    return names;
}

const std::map<std::string, Allocator> &allocator_names() {
    static const std::map<std::string, Allocator> names{{"auto", Allocator::auto_select},
                                                        {"default", Allocator::system},
                                                        {"jemalloc", Allocator::jemalloc},
                                                        {"tcmalloc", Allocator::tcmalloc}};
    return names;
}

const std::map<std::string, OmpRuntime> &omp_runtime_names() {
    static const std::map<std::string, OmpRuntime> names{{"auto", OmpRuntime::auto_select},
                                                         {"default", OmpRuntime::system},
                                                         {"intel", OmpRuntime::intel}};
    return names;
}

void validate(const LaunchOptions &opts) {
    if (!opts.topology_xml.empty() && !opts.synthetic.empty())
        fail_usage("--topology and --synthetic both describe the machine; use one of them");
    if ((!opts.topology_xml.empty() || !opts.synthetic.empty()) && !opts.dry_run)
        fail_usage(std::string(opts.synthetic.empty() ? "--topology" : "--synthetic") +
                    " plans for another machine and cannot run there; add --dry-run");
    if (opts.require_isa_share <= 0.0 || opts.require_isa_share > 1.0)
        fail_usage("--require-isa-share " + std::to_string(opts.require_isa_share) +
                    ": must be a fraction in (0, 1]");
    if (!opts.require_isa.empty()) canonical_isa(opts.require_isa);
    if (opts.timeout_seconds < 0)
        fail_usage("--timeout must be 0 (none) or a number of seconds");
    if (opts.log_file_prefix.empty() || opts.log_file_prefix.find('/') != std::string::npos)
        fail_usage("--log-file-prefix '" + opts.log_file_prefix +
                    "': must be a non-empty file name without '/' (use --log-dir for the directory)");
    if (opts.benchmark &&
        (opts.allocator == Allocator::system || opts.allocator == Allocator::tcmalloc))
        fail_usage("--benchmark tunes jemalloc and conflicts with --memory-allocator " +
                    name_of(allocator_names(), opts.allocator) + "; drop one of them");
    if (opts.quiet && opts.verbose) fail_usage("--quiet and --verbose conflict; pick one");
}

void validate_multi_node(const LaunchOptions &opts) {
    const bool multi = opts.multi_node() || opts.rank_exec;
    const std::pair<bool, const char *> needs_multi[] = {
        {!opts.master_addr.empty(), "--master-addr"},
        {opts.master_port != 29500, "--master-port"},
        {opts.mpi != MpiKind::auto_select, "--mpi"},
        {!opts.extra_mpi_params.empty(), "--extra-mpi-params"},
        {opts.skip_host_check, "--skip-host-check"}};
    for (const auto &[given, flag] : needs_multi)
        if (given && !multi)
            fail_usage(std::string(flag) + " is for multi-node runs; add --nnodes N --hostfile FILE "
                                           "(or --nprocs-per-node P for one host)");
    if (!multi) return;
    if (opts.nnodes < 0) fail_usage("--nnodes " + std::to_string(opts.nnodes) + ": must be 1 or more");
    if (opts.nprocs_per_node < 0)
        fail_usage("--nprocs-per-node " + std::to_string(opts.nprocs_per_node) +
                   ": must be 1 or more (0: one rank per NUMA node)");
    if (opts.nnodes > 1 && opts.hostfile.empty())
        fail_usage("--nnodes " + std::to_string(opts.nnodes) + " needs --hostfile FILE naming the hosts");
    if (opts.master_port < 1 || opts.master_port > 65535)
        fail_usage("--master-port " + std::to_string(opts.master_port) + ": must be a TCP port (1-65535)");
    const std::pair<bool, const char *> single_only[] = {
        {opts.ninstances != 0, "--ninstances"},
        {!opts.instance_idx.empty(), "--instance-idx"},
        {opts.latency_mode, "--latency-mode"},
        {opts.throughput_mode, "--throughput-mode"}};
    for (const auto &[given, flag] : single_only)
        if (given)
            fail_usage(std::string(flag) + " plans instances on one host; a multi-node run has "
                       "--nprocs-per-node ranks on each host: drop " + flag);
}

PartitionRequest partition_request(const LaunchOptions &opts) {
    PartitionRequest req;
    req.ninstances = opts.ninstances;
    req.ncores_per_instance = opts.ncores_per_instance;
    req.strategy = opts.strategy;
    req.bind_numa_node = opts.bind_numa_node;
    req.use_logical_cores = opts.use_logical_cores;
    req.use_e_cores = opts.use_e_cores;
    req.latency_mode = opts.latency_mode;
    req.throughput_mode = opts.throughput_mode;
    if (!opts.cores_list.empty()) req.cores_list = parse_id_list(opts.cores_list, "--cores-list");
    if (!opts.cpus_list.empty()) req.cpus_list = parse_id_list(opts.cpus_list, "--cpus-list");
    if (!opts.nodes_list.empty()) req.nodes_list = parse_id_list(opts.nodes_list, "--nodes-list");
    if (!opts.instance_idx.empty())
        req.instance_idx = parse_id_list(opts.instance_idx, "--instance-idx");
    return req;
}

}  // namespace ipex::launch
