#include "launch/launch.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <unistd.h>
#include <set>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "base/log.h"
#include "launch/id_list.h"
#include "base/isa_check.h"
#include "launch/mpi_launch.h"
#include "launch/rank_exec.h"
#include "launch/report.h"
#include "launch/runner.h"

namespace ipex::launch {
namespace {

std::string get(const Environment &env, const std::string &name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
}

}  // namespace

void make_dirs(const std::string &dir) {
    std::string path;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = dir.find('/', pos + 1);
        path = dir.substr(0, pos);
        if (path.empty()) continue;
        struct stat st {};
        if (stat(path.c_str(), &st) == 0) {
            if (!S_ISDIR(st.st_mode)) throw_usage("--log-dir " + dir + ": " + path + " is not a directory");
            continue;
        }
        if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
            throw_usage("--log-dir " + dir + ": cannot create " + path + " (" + std::strerror(errno) + ")");
    }
}

namespace {

std::string plural(size_t n, const std::string &word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Which instances failed, as one error message.
std::string failure_message(const LaunchPlan &plan, const std::vector<InstanceOutcome> &outcomes) {
    std::string msg;
    size_t failed = 0;
    for (size_t i = 0; i < outcomes.size(); ++i) {
        const auto &o = outcomes[i];
        if (o.ok()) continue;
        ++failed;
        msg += (msg.empty() ? "" : "; ") + std::string("instance ") + std::to_string(o.index) + " " +
               (o.start_error.empty() ? o.status_text() : o.start_error);
        if (!plan.instances[i].log_path.empty()) msg += " (log: " + plan.instances[i].log_path + ")";
    }
    return plural(failed, "instance") + " of " + std::to_string(outcomes.size()) + " failed: " + msg;
}

}  // namespace

Topology load_topology(const LaunchOptions &opts) {
    if (!opts.topology_xml.empty()) return load_topology_xml(opts.topology_xml);
    if (!opts.synthetic.empty()) return load_topology_synthetic(opts.synthetic);
    return load_this_machine();
}

std::string log_file_name(const std::string &prefix, const InstancePlacement &placement) {
    std::string cpus = format_id_list(placement.cpus);
    for (char &c : cpus)
        if (c == ',') c = '_';
    return prefix + "_instance" + std::to_string(placement.index) + "_cpus" + cpus + ".log";
}

LaunchPlan make_plan(const LaunchOptions &opts, const Topology &topo, const Environment &env) {
    validate(opts);
    LaunchPlan plan;
    plan.topology = topo;
    const Partition part = partition(topo, partition_request(opts));
    plan.ninstances = part.ninstances;
    plan.unused_slots = part.unused_slots;
    plan.slot_unit = part.slot_unit;
    plan.warnings = part.warnings;

    EnvRequest env_req;
    env_req.allocator = opts.allocator;
    env_req.benchmark = opts.benchmark;
    env_req.omp = opts.omp;
    env_req.onednn_verbose = opts.onednn_verbose || !opts.require_isa.empty();
    env_req.library_dirs = default_library_dirs(env);
    plan.runtimes = choose_runtimes(env_req, env);
    plan.warnings.insert(plan.warnings.end(), plan.runtimes.warnings.begin(),
                         plan.runtimes.warnings.end());

    ProgramRequest prog;
    prog.command = opts.command;
    prog.module = opts.module;
    prog.no_python = opts.no_python;
    prog.python = opts.python;
    prog.must_exist = !opts.dry_run;
    const ResolvedCommand cmd = resolve_command(prog, env);
    plan.warnings.insert(plan.warnings.end(), cmd.warnings.begin(), cmd.warnings.end());

    plan.task_manager = opts.task_manager;
    std::string tool_path;
    if (opts.task_manager == TaskManager::numactl || opts.task_manager == TaskManager::taskset) {
        const std::string tool = name_of(task_manager_names(), opts.task_manager);
        if (auto path = find_executable(tool, get(env, "PATH"))) {
            tool_path = *path;
        } else {
            const std::string msg = "--multi-task-manager " + tool + ": " + tool +
                                    " was not found in PATH; install the Debian package " +
                                    (tool == "numactl" ? "numactl" : "util-linux") +
                                    " or use --multi-task-manager auto";
            if (!opts.dry_run) throw_unsupported(msg);
            plan.warnings.push_back(msg);
        }
    }
    std::set<int> all_nodes;
    for (const auto &p : part.instances) all_nodes.insert(p.numa_nodes.begin(), p.numa_nodes.end());
    plan.membind = opts.task_manager == TaskManager::auto_select ||
                   opts.task_manager == TaskManager::numactl;
    if (opts.task_manager == TaskManager::numactl && topo.this_system &&
        !memory_policy_allowed(std::vector<int>(all_nodes.begin(), all_nodes.end()))) {
        plan.membind = false;
        plan.warnings.push_back("this system refuses memory policies (set_mempolicy); running "
                                "numactl without --membind, so only CPUs are bound");
    }
    switch (opts.task_manager) {
    case TaskManager::auto_select: plan.binding = "CPU affinity + memory policy (set in the child)"; break;
    case TaskManager::none: plan.binding = "none (OpenMP thread placement variables only)"; break;
    case TaskManager::numactl: plan.binding = plan.membind ? "numactl --physcpubind --membind" : "numactl --physcpubind"; break;
    case TaskManager::taskset: plan.binding = "taskset --cpu-list (no memory binding)"; break;
    }

    std::vector<InstanceEnv> envs;
    for (const auto &placement : part.instances) {
        InstancePlan ip;
        ip.placement = placement;
        ip.env = plan_instance_env(plan.runtimes, env_req, env, placement, part.ninstances);
        ip.command = task_manager_prefix(opts.task_manager, placement, plan.membind);
        ip.executable = ip.command.empty() ? cmd.executable : tool_path;
        if (ip.command.empty()) {
            ip.command = cmd.argv;
        } else {  // the tool looks the program up again: hand it the path found here
            ip.command.push_back(cmd.executable.empty() ? cmd.argv.front() : cmd.executable);
            ip.command.insert(ip.command.end(), cmd.argv.begin() + 1, cmd.argv.end());
        }
        if (!opts.log_dir.empty())
            ip.log_path = opts.log_dir + "/" + log_file_name(opts.log_file_prefix, placement);
        envs.push_back(ip.env);
        plan.instances.push_back(std::move(ip));
    }
    const auto kept = kept_variable_warnings(envs);
    plan.warnings.insert(plan.warnings.end(), kept.begin(), kept.end());
    return plan;
}

int run_launch(const LaunchOptions &opts) {
    log::set_level(opts.quiet ? log::Level::quiet : opts.verbose ? log::Level::verbose : log::Level::normal);
    if (opts.rank_exec) return run_rank(opts);
    validate_multi_node(opts);
    if (opts.multi_node()) return run_multi_node(opts);
    validate(opts);
    const Environment env = current_environment();
    const LaunchPlan plan = make_plan(opts, load_topology(opts), env);
    for (const auto &w : plan.warnings) log::warn(w);
    if (opts.dry_run) {
        std::cout << (opts.json ? plan_json(plan).dump(2) + "\n" : plan_text(plan));
        return 0;
    }
    if (!opts.log_dir.empty()) make_dirs(opts.log_dir);
    std::vector<RunSpec> specs;
    for (const auto &ip : plan.instances) {
        RunSpec spec;
        spec.index = ip.placement.index;
        spec.executable = ip.executable;
        spec.argv = ip.command;
        for (const auto &[name, value] : apply_env(env, ip.env)) spec.envp.push_back(name + "=" + value);
        spec.binding = prepare_binding(ip.placement, plan.task_manager);
        spec.binding.membind = spec.binding.membind && plan.membind;
        spec.log_path = ip.log_path;
        specs.push_back(std::move(spec));
    }
    const bool verbose_stats = opts.onednn_verbose || !opts.require_isa.empty();
    RunSettings settings;
    settings.stdout_to_stderr = opts.json;
    settings.parse_verbose = verbose_stats;
    settings.hide_verbose_lines = verbose_stats;
    settings.timeout_seconds = opts.timeout_seconds;
    log::verbose("running " + plural(specs.size(), "instance") + " (" + plan.binding + ")");
    const auto outcomes = run_instances(specs, settings);

    std::vector<int> refused;
    int refused_errno = 0;
    for (const auto &o : outcomes)
        if (o.membind_errno) refused.push_back(o.index), refused_errno = o.membind_errno;
    if (!refused.empty())
        log::warn("the kernel refused the memory policy for instance(s) " + format_id_list(refused) +
                  " (set_mempolicy: " + std::strerror(refused_errno) +
                  "); they ran with CPU affinity only");

    IsaCheck check;
    if (!opts.require_isa.empty()) check = check_isa(outcomes, canonical_isa(opts.require_isa),
                                                     opts.require_isa_share);
    bool all_ok = true;
    for (const auto &o : outcomes) all_ok = all_ok && o.ok();
    if (!opts.quiet || !all_ok || !check.ok) {
        std::cerr << summary_text(plan, outcomes);
        if (verbose_stats) std::cerr << verbose_text(outcomes, check);
    }
    const auto report = results_json(plan, outcomes, check, verbose_stats);
    if (opts.json) std::cout << report.dump(2) << "\n";
    if (!opts.log_dir.empty())
        write_text_atomically(opts.log_dir + "/" + opts.log_file_prefix + "_summary.json",
                              report.dump(2) + "\n");
    if (!all_ok) throw_check_failed(failure_message(plan, outcomes));
    if (!check.ok) throw_check_failed(check.message);
    return 0;
}

}  // namespace ipex::launch
