#include "launch/mpi_plan.h"

#include <unistd.h>

#include "base/errors.h"
#include "base/log.h"

namespace ipex::launch {
namespace {

std::string get(const Environment &env, const std::string &name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
}

int number(const Environment &env, const std::string &name) {
    const std::string text = get(env, name);
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
        throw_usage(name + "='" + text + "': the MPI process manager set a value that is not a rank number");
    return std::stoi(text);
}

}  // namespace

std::optional<RankIdentity> rank_identity(const Environment &env) {
    struct Names {
        const char *rank, *size, *local_rank, *local_size;
    };
    for (const Names &n : {Names{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE"},
                           Names{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"}}) {
        if (!env.count(n.rank)) continue;
        RankIdentity id;
        id.rank = number(env, n.rank);
        id.world_size = number(env, n.size);
        id.local_rank = number(env, n.local_rank);
        id.local_world_size = number(env, n.local_size);
        if (id.rank >= id.world_size || id.local_rank >= id.local_world_size || id.local_world_size < 1)
            throw_usage(std::string(n.rank) + "=" + std::to_string(id.rank) + ", " + n.size + "=" +
                       std::to_string(id.world_size) + ", " + n.local_rank + "=" + std::to_string(id.local_rank) +
                       ", " + n.local_size + "=" + std::to_string(id.local_world_size) +
                       ": the MPI process manager's rank variables do not fit together");
        return id;
    }
    return std::nullopt;
}

void add_rank_variables(InstanceEnv &env, const RankIdentity &id, const std::string &master_addr,
                        int master_port, int nnodes) {
    const std::pair<const char *, std::string> vars[] = {
        {"MASTER_ADDR", master_addr},
        {"MASTER_PORT", std::to_string(master_port)},
        {"RANK", std::to_string(id.rank)},
        {"WORLD_SIZE", std::to_string(id.world_size)},
        {"LOCAL_RANK", std::to_string(id.local_rank)},
        {"LOCAL_WORLD_SIZE", std::to_string(id.local_world_size)},
        {"IPEX_LAUNCH_RANK", std::to_string(id.rank)},
        {"IPEX_LAUNCH_NNODES", std::to_string(nnodes)}};
    for (const auto &[name, value] : vars) {
        env.set[name] = value;
        env.kept.erase(name);
        env.wanted.erase(name);
    }
}

LaunchOptions host_options(const LaunchOptions &opts, int nprocs_per_node) {
    LaunchOptions host = opts;
    host.ninstances = nprocs_per_node;
    host.nnodes.reset();
    host.nprocs_per_node.reset();
    host.hostfile.clear();
    host.master_addr.clear();
    host.master_port = 29500;
    host.mpi = MpiKind::auto_select;
    host.extra_mpi_params.clear();
    host.skip_host_check = false;
    host.rank_exec = false;
    host.report_to.clear();
    host.rank_hosts.clear();
    return host;
}

std::vector<std::string> rank_exec_command(const LaunchOptions &opts, const std::string &self,
                                           const std::vector<std::string> &hosts, int nprocs_per_node,
                                           const std::string &master_addr, const std::string &report_to) {
    std::string host_list;
    for (const auto &h : hosts) host_list += (host_list.empty() ? "" : ",") + h;
    std::vector<std::string> argv{self,
                                  "--rank-exec",
                                  "--nnodes",
                                  std::to_string(hosts.size()),
                                  "--nprocs-per-node",
                                  std::to_string(nprocs_per_node),
                                  "--master-addr",
                                  master_addr,
                                  "--master-port",
                                  std::to_string(opts.master_port),
                                  "--rank-hosts",
                                  host_list};
    if (!report_to.empty()) argv.insert(argv.end(), {"--report", report_to});
    const LaunchOptions defaults;
    auto value = [&argv](const char *flag, const std::string &v, const std::string &def) {
        if (v != def) argv.insert(argv.end(), {flag, v});
    };
    auto flag = [&argv](const char *name, bool on) {
        if (on) argv.emplace_back(name);
    };
    if (opts.ncores_per_instance)
        argv.insert(argv.end(), {"--ncores-per-instance", std::to_string(*opts.ncores_per_instance)});
    value("--strategy", name_of(strategy_names(), opts.strategy), "close");
    flag("--bind-numa-node", opts.bind_numa_node);
    flag("--use-logical-cores", opts.use_logical_cores);
    flag("--use-e-cores", opts.use_e_cores);
    value("--cores-list", opts.cores_list, "");
    value("--cpus-list", opts.cpus_list, "");
    value("--nodes-list", opts.nodes_list, "");
    value("--multi-task-manager", name_of(task_manager_names(), opts.task_manager), "auto");
    value("--memory-allocator", name_of(allocator_names(), opts.allocator), "auto");
    flag("--benchmark", opts.benchmark);
    value("--omp-runtime", name_of(omp_runtime_names(), opts.omp), "auto");
    flag("--module", opts.module);
    flag("--no-python", opts.no_python);
    value("--python", opts.python, defaults.python);
    // The launcher checks --require-isa across ranks; a rank only needs the verbose lines.
    flag("--onednn-verbose", opts.onednn_verbose || !opts.require_isa.empty());
    argv.emplace_back("--");
    argv.insert(argv.end(), opts.command.begin(), opts.command.end());
    return argv;
}

std::string rank_log_file_name(const std::string &prefix, int rank, const std::string &host) {
    std::string safe = host;
    for (char &c : safe)
        if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
    return prefix + "_rank" + std::to_string(rank) + "_" + safe + ".log";
}

MultiNodePlan make_multi_node_plan(const LaunchOptions &opts, const Topology &topo, const Environment &env,
                                   const std::vector<HostEntry> &hosts, const std::string &self,
                                   const std::string &report_port, const std::string &report_token) {
    validate_multi_node(opts);
    MultiNodePlan plan;
    plan.hostfile = opts.hostfile;
    plan.nnodes = opts.nnodes.value_or(static_cast<int>(hosts.size()));
    if (plan.nnodes > static_cast<int>(hosts.size()))
        throw_usage("--nnodes " + std::to_string(plan.nnodes) + ": " +
                   (opts.hostfile.empty() ? std::string("no --hostfile") : "--hostfile " + opts.hostfile) +
                   " lists only " + std::to_string(hosts.size()) + " host(s); add hosts or lower --nnodes");
    plan.hosts.assign(hosts.begin(), hosts.begin() + plan.nnodes);
    plan.nprocs_per_node = opts.nprocs_per_node.value_or(static_cast<int>(topo.numa_nodes.size()));
    for (const auto &h : plan.hosts)
        if (h.slots != 0 && h.slots < plan.nprocs_per_node)
            throw_usage("--nprocs-per-node " + std::to_string(plan.nprocs_per_node) + ": host " + h.name +
                       " has slots=" + std::to_string(h.slots) + " in --hostfile " + opts.hostfile + " line " +
                       std::to_string(h.line) + "; lower --nprocs-per-node or raise its slots");
    plan.world_size = plan.nnodes * plan.nprocs_per_node;
    plan.master_addr = !opts.master_addr.empty() ? opts.master_addr
                       : opts.hostfile.empty()   ? std::string("127.0.0.1")
                                                 : plan.hosts.front().name;
    plan.master_port = opts.master_port;

    LaunchOptions host = host_options(opts, plan.nprocs_per_node);
    try {
        plan.host_plan = make_plan(host, topo, env);
    } catch (const Error &e) {
        throw Error(e.code(), std::string(e.what()) + " (planning " + std::to_string(plan.nprocs_per_node) +
                                  " ranks per host for --nprocs-per-node)");
    }
    plan.warnings = plan.host_plan.warnings;

    if (auto found = find_mpi(opts.mpi, get(env, "PATH"))) {
        plan.mpi_found = true;
        plan.mpi = *found;
    } else {
        plan.mpi.kind = opts.mpi == MpiKind::mpich ? MpiKind::mpich : MpiKind::openmpi;
        plan.warnings.push_back(mpi_not_found(opts.mpi));
    }
    std::vector<std::string> names;
    for (const auto &h : plan.hosts) names.push_back(h.name);
    MpiCommandRequest req;
    req.launcher = plan.mpi;
    req.hosts = names;
    req.nprocs_per_node = plan.nprocs_per_node;
    req.as_root = geteuid() == 0;
    plan.forwarded = forwarded_variables(env);
    req.forward_env = plan.forwarded;
    req.extra = split_mpi_params(opts.extra_mpi_params);
    const bool ipv6 = plan.master_addr.find(':') != std::string::npos;
    const std::string report_to = (ipv6 ? "[" + plan.master_addr + "]" : plan.master_addr) + ":" + report_port +
                                  ":" + report_token;
    req.rank_command = rank_exec_command(opts, self, names, plan.nprocs_per_node, plan.master_addr, report_to);
    plan.mpi_command = build_mpi_command(req);
    if (!opts.log_dir.empty()) plan.mpirun_log = opts.log_dir + "/" + opts.log_file_prefix + "_mpirun.log";

    for (int h = 0; h < plan.nnodes; ++h)
        for (int lr = 0; lr < plan.nprocs_per_node; ++lr) {
            RankPlan rp;
            rp.rank = h * plan.nprocs_per_node + lr;
            rp.host_index = h;
            rp.local_rank = lr;
            rp.host = names[static_cast<size_t>(h)];
            rp.instance = plan.host_plan.instances[static_cast<size_t>(lr)];
            add_rank_variables(rp.instance.env, {rp.rank, plan.world_size, lr, plan.nprocs_per_node},
                               plan.master_addr, plan.master_port, plan.nnodes);
            rp.instance.log_path = opts.log_dir.empty()
                                       ? ""
                                       : opts.log_dir + "/" + rank_log_file_name(opts.log_file_prefix, rp.rank, rp.host);
            plan.ranks.push_back(std::move(rp));
        }
    return plan;
}

}  // namespace ipex::launch
