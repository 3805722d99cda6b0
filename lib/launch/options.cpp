#include "launch/options.h"

#include "base/errors.h"
#include "base/log.h"
#include "launch/host_name.h"
#include "launch/id_list.h"
#include "base/isa_check.h"

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

const std::vector<CountOption> &count_options() {
    static const std::vector<CountOption> options{
        {"--ninstances", &LaunchOptions::ninstances, {}, "1, or as many as --ncores-per-instance allows"},
        {"--ncores-per-instance",
         &LaunchOptions::ncores_per_instance,
         {{0, "even split, leftovers unused"}, {-1, "even split, leftovers to the first instances"}},
         "0, an even split with the leftovers unused"},
        {"--nnodes", &LaunchOptions::nnodes, {}, "every host of --hostfile"},
        {"--nprocs-per-node", &LaunchOptions::nprocs_per_node, {}, "one rank per NUMA node"}};
    return options;
}

void check_counts(const LaunchOptions &opts) {
    for (const auto &c : count_options()) {
        const std::optional<int> &value = opts.*c.field;
        if (!value || *value >= 1 || c.modes.count(*value)) continue;
        std::string takes = "a whole number of 1 or more";
        for (auto it = c.modes.rbegin(); it != c.modes.rend(); ++it)
            takes += ", or " + std::to_string(it->first) + " (" + it->second + ")";
        throw_usage(std::string(c.flag) + " " + std::to_string(*value) + ": takes " + takes +
                   "; leave it out for the default (" + c.when_left_out + ")");
    }
}

void validate(const LaunchOptions &opts) {
    check_counts(opts);
    if (!opts.topology_xml.empty() && !opts.synthetic.empty())
        throw_usage("--topology and --synthetic both describe the machine; use one of them");
    if ((!opts.topology_xml.empty() || !opts.synthetic.empty()) && !opts.dry_run)
        throw_usage(std::string(opts.synthetic.empty() ? "--topology" : "--synthetic") +
                    " plans for another machine and cannot run there; add --dry-run");
    if (opts.require_isa_share <= 0.0 || opts.require_isa_share > 1.0)
        throw_usage("--require-isa-share " + std::to_string(opts.require_isa_share) +
                    ": must be a fraction in (0, 1]");
    if (!opts.require_isa.empty()) canonical_isa(opts.require_isa);
    if (opts.timeout_seconds < 0)
        throw_usage("--timeout must be 0 (none) or a number of seconds");
    if (opts.log_file_prefix.empty() || opts.log_file_prefix.find('/') != std::string::npos)
        throw_usage("--log-file-prefix '" + opts.log_file_prefix +
                    "': must be a non-empty file name without '/' (use --log-dir for the directory)");
    if (opts.benchmark &&
        (opts.allocator == Allocator::system || opts.allocator == Allocator::tcmalloc))
        throw_usage("--benchmark tunes jemalloc and conflicts with --memory-allocator " +
                    name_of(allocator_names(), opts.allocator) + "; drop one of them");
    if (opts.quiet && opts.verbose) throw_usage("--quiet and --verbose conflict; pick one");
}

void validate_multi_node(const LaunchOptions &opts) {
    check_counts(opts);
    const bool multi = opts.multi_node() || opts.rank_exec;
    const std::pair<bool, const char *> needs_multi[] = {
        {!opts.master_addr.empty(), "--master-addr"},
        {opts.master_port != 29500, "--master-port"},
        {opts.mpi != MpiKind::auto_select, "--mpi"},
        {!opts.extra_mpi_params.empty(), "--extra-mpi-params"},
        {opts.skip_host_check, "--skip-host-check"}};
    for (const auto &[given, flag] : needs_multi)
        if (given && !multi)
            throw_usage(std::string(flag) + " is for multi-node runs; add --nnodes N --hostfile FILE "
                                           "(or --nprocs-per-node P for one host)");
    if (!multi) return;
    if (opts.nnodes.value_or(1) > 1 && opts.hostfile.empty())
        throw_usage("--nnodes " + std::to_string(*opts.nnodes) + " needs --hostfile FILE naming the hosts");
    if (!opts.master_addr.empty())
        if (const std::string why = host_name_problem(opts.master_addr, true); !why.empty())
            throw_usage("--master-addr '" + shown_host(opts.master_addr) + "' " + why +
                       "; pass a host name, an IPv4 or an IPv6 address of this machine");
    if (opts.master_port < 1 || opts.master_port > 65535)
        throw_usage("--master-port " + std::to_string(opts.master_port) + ": must be a TCP port (1-65535)");
    const std::pair<bool, const char *> single_only[] = {
        {opts.ninstances.has_value(), "--ninstances"},
        {!opts.instance_idx.empty(), "--instance-idx"},
        {opts.latency_mode, "--latency-mode"},
        {opts.throughput_mode, "--throughput-mode"}};
    for (const auto &[given, flag] : single_only)
        if (given)
            throw_usage(std::string(flag) + " plans instances on one host; a multi-node run has "
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
