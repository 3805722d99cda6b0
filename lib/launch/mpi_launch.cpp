#include "launch/mpi_launch.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "base/log.h"
#include "launch/host_check.h"
#include "launch/id_list.h"
#include "base/isa_check.h"
#include "launch/mpi_report.h"
#include "launch/rank_collector.h"
#include "launch/rank_report.h"

namespace ipex::launch {
namespace {

// After mpirun ends, how long rank connections may still deliver output.
constexpr double kDrainSeconds = 5.0;

std::string self_executable() {
    char buf[PATH_MAX] = {0};
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) throw_internal("cannot find this program's path (/proc/self/exe)");
    return std::string(buf, static_cast<size_t>(n));
}

std::string joined(const std::vector<std::string> &items) {
    std::string out;
    for (const auto &i : items) out += (out.empty() ? "" : ", ") + i;
    return out;
}

std::string where(const MultiNodePlan &plan, const HostEntry &h) {
    return "--hostfile " + plan.hostfile + " line " + std::to_string(h.line);
}

}  // namespace

std::string HostCheckReport::error_message() const {
    if (problems.empty()) return "";
    std::string tail;
    const size_t others = problems.size() - 1 + more_failed;
    const size_t above = problems.size() - 1;
    if (others > 0)
        tail += std::to_string(others) + " more failed" +
                (above == 0 ? "" : above == others ? " (listed above)" : " (" + std::to_string(above) + " listed above)");
    if (not_checked > 0)
        tail += (tail.empty() ? "" : ", and ") + std::to_string(not_checked) + " more not checked (" + stopped_because + ")";
    return problems.front().message + (tail.empty() ? "" : "; " + tail);
}

HostCheckReport check_hosts(const MultiNodePlan &plan, bool probe, const HostCheckLimits &limits,
                            HostResolver resolve, HostProber prober) {
    const HostEntry &first = plan.hosts.front();
    std::vector<HostQuery> queries{{plan.master_addr, false}, {first.name, false}};
    for (size_t i = 1; i < plan.hosts.size(); ++i) queries.push_back({plan.hosts[i].name, probe});
    const auto status = check_host_list(queries, limits, std::move(resolve), std::move(prober));

    HostCheckReport report;
    auto &problems = report.problems;
    const bool master_is_first = plan.master_addr == first.name;
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", limits.deadline_ms / 1000.0);
    // Why a host that must be this machine is not, or nullopt when it is.
    const auto not_here = [&](const HostStatus &st) -> std::optional<std::string> {
        const std::string mine = "this machine's addresses: " + joined(local_addresses());
        switch (st.state) {
        case HostState::local: return std::nullopt;
        case HostState::unresolved: return "it does not resolve; " + mine;
        case HostState::unfinished:
        case HostState::not_checked: return std::string("it did not resolve within the ") + seconds + " s host check";
        default: return mine;
        }
    };
    if (const auto why = not_here(status[0])) {
        if (master_is_first && !plan.hostfile.empty())
            problems.push_back({ExitCode::usage, "the first host of " + where(plan, first) + ", " + first.name +
                                                     ", is not this machine (" + *why + "); rank 0 runs where "
                                                     "ipex-launch runs and is the master address: run ipex-launch on " +
                                                     first.name + " or list this machine first"});
        else
            problems.push_back({ExitCode::usage, "--master-addr " + plan.master_addr +
                                                     " is not an address of this machine (" + *why +
                                                     "); rank 0 runs here and torch.distributed listens on "
                                                     "MASTER_ADDR: pass one of them"});
    } else if (const auto why_first = not_here(status[1]); why_first && !master_is_first) {
        problems.push_back({ExitCode::usage, "rank 0 runs on the first host of " + where(plan, first) + ", " +
                                                 first.name + ", which is not this machine (" + *why_first +
                                                 "); run ipex-launch there or list this machine first"});
    }
    size_t listed = 0;
    for (size_t i = 2; i < status.size(); ++i) {
        const HostStatus &st = status[i];
        const HostEntry &h = plan.hosts[i - 1];
        if (st.state == HostState::not_checked) ++report.not_checked;
        if (!st.failed()) continue;
        if (listed == static_cast<size_t>(std::max(1, limits.max_failures))) {
            ++report.more_failed;
            continue;
        }
        ++listed;
        if (st.state == HostState::unresolved)
            problems.push_back({ExitCode::bad_input, where(plan, h) + ": host " + h.name +
                                                         " does not resolve (check the name, or write its address)"});
        else if (st.state == HostState::unfinished)
            problems.push_back({ExitCode::bad_input, where(plan, h) + ": host " + h.name + " gave no answer within the " +
                                                         seconds + " s host check (resolving or TCP port " +
                                                         std::to_string(limits.port) + "); check the name and that "
                                                         "it is up, or pass --skip-host-check"});
        else
            problems.push_back({ExitCode::bad_input,
                                where(plan, h) + ": host " + h.name + " does not answer (TCP port " +
                                    std::to_string(limits.port) + ": " + st.error +
                                    "); check that it is up and reachable, or pass --skip-host-check if the MPI "
                                    "launcher reaches it another way"});
    }
    report.stopped_because = "the host check stops after " + std::to_string(limits.max_failures) +
                             " failed hosts or " + seconds + " s";
    if (listed == 0 && report.not_checked > 0) {  // out of time between two hosts: none failed
        size_t first_unchecked = 2;
        while (status[first_unchecked].state != HostState::not_checked) ++first_unchecked;
        const HostEntry &h = plan.hosts[first_unchecked - 1];
        problems.push_back({ExitCode::bad_input, "--hostfile " + plan.hostfile + ": the host check reached only " +
                                                     std::to_string(plan.hosts.size() - 1 - report.not_checked) +
                                                     " of the " + std::to_string(plan.hosts.size() - 1) +
                                                     " other hosts in " + seconds + " s (first not checked: line " +
                                                     std::to_string(h.line) + ", " + h.name +
                                                     "); pass --skip-host-check for a hostfile this long"});
        report.not_checked = 0;
    }
    return report;
}

int run_multi_node(const LaunchOptions &opts) {
    validate_multi_node(opts);
    const Environment env = current_environment();
    const Topology topo = load_topology(opts);
    std::vector<HostEntry> hosts;
    if (opts.hostfile.empty()) hosts.push_back({"localhost", 0, 0});
    else hosts = load_hostfile(opts.hostfile);

    std::unique_ptr<ReportListener> listener;
    if (!opts.dry_run) listener = std::make_unique<ReportListener>();
    const MultiNodePlan plan =
        make_multi_node_plan(opts, topo, env, hosts, self_executable(),
                             listener ? std::to_string(listener->port()) : "PORT", listener ? listener->token() : "TOKEN");
    for (const auto &w : plan.warnings)  // a missing MPI launcher is the error below when running
        if (opts.dry_run || plan.mpi_found || w != mpi_not_found(opts.mpi)) log::warn(w);
    if (opts.dry_run) {
        std::cout << (opts.json ? multi_node_plan_json(plan).dump(2) + "\n" : multi_node_plan_text(plan));
        return 0;
    }
    const HostCheckReport checked = check_hosts(plan, !opts.skip_host_check);
    if (!checked.problems.empty()) {
        for (size_t i = 1; i < checked.problems.size(); ++i) log::warn(checked.problems[i].message);
        throw Error(checked.problems.front().code, checked.error_message());
    }
    if (!plan.mpi_found) throw_unsupported(mpi_not_found(opts.mpi));
    if (!opts.log_dir.empty()) make_dirs(opts.log_dir);

    const bool verbose_stats = opts.onednn_verbose || !opts.require_isa.empty();
    CollectorSettings cs;
    for (const auto &r : plan.ranks) {
        cs.labels.push_back(r.host + ":" + std::to_string(r.rank));
        cs.log_paths.push_back(r.instance.log_path);
    }
    cs.stdout_to_stderr = opts.json;
    cs.parse_verbose = verbose_stats;
    cs.hide_verbose_lines = verbose_stats;
    RankCollector collector(*listener, cs);

    RunSpec mpirun;
    mpirun.index = 0;
    mpirun.label = "mpirun";
    mpirun.executable = plan.mpi.path;
    mpirun.argv = plan.mpi_command;
    for (const auto &[name, value] : env) mpirun.envp.push_back(name + "=" + value);
    mpirun.log_path = plan.mpirun_log;
    RunSettings settings;
    settings.stdout_to_stderr = true;  // mpirun's own messages; the ranks' output comes by the report channel
    settings.timeout_seconds = opts.timeout_seconds;
    // Signals (and --timeout) reach the ranks over their report connections, at once on
    // every host; mpirun gets them only for ranks not connected (yet), since Open MPI passes a
    // SIGTERM on after its kill timer and sends SIGKILL one timer later.
    settings.deliver_signal = [&collector](int sig) { return collector.signal_ranks(sig); };
    settings.signal_targets = "the ranks";
    log::verbose("running " + std::to_string(plan.world_size) + " ranks through " + shell_join(plan.mpi_command));
    const InstanceOutcome mpirun_outcome = run_instances({mpirun}, settings).front();
    std::vector<RankResult> ranks = collector.finish(kDrainSeconds);

    std::vector<InstanceOutcome> outcomes;
    for (size_t i = 0; i < ranks.size(); ++i) {
        RankResult &r = ranks[i];
        r.outcome.index = static_cast<int>(i);
        if (!r.finished) {
            r.outcome.start_error =
                (r.started ? "ended without reporting its exit status (mpirun: " : "did not start (mpirun: ") +
                (mpirun_outcome.start_error.empty() ? mpirun_outcome.status_text() : mpirun_outcome.start_error) +
                (plan.mpirun_log.empty() ? "; its output is above)" : "; its log: " + plan.mpirun_log + ")");
        }
        if (mpirun_outcome.timed_out) r.outcome.timed_out = true;
        outcomes.push_back(r.outcome);
    }

    IsaCheck check;
    if (!opts.require_isa.empty())
        check = check_isa(outcomes, canonical_isa(opts.require_isa), opts.require_isa_share, "rank");
    bool all_ok = mpirun_outcome.ok();
    for (const auto &o : outcomes) all_ok = all_ok && o.ok();
    if (!opts.quiet || !all_ok || !check.ok) {
        std::cerr << rank_summary_text(plan, ranks);
        if (verbose_stats) std::cerr << verbose_text(outcomes, check, "rank");
    }
    const auto report = multi_node_results_json(plan, ranks, mpirun_outcome, check, verbose_stats);
    if (opts.json) std::cout << report.dump(2) << "\n";
    if (!opts.log_dir.empty())
        write_text_atomically(opts.log_dir + "/" + opts.log_file_prefix + "_summary.json", report.dump(2) + "\n");
    if (!all_ok) {
        std::vector<int> failed;
        std::string first;
        for (const auto &o : outcomes)
            if (!o.ok()) {
                failed.push_back(o.index);
                if (first.empty())
                    first = "rank " + std::to_string(o.index) + " on " + plan.ranks[static_cast<size_t>(o.index)].host +
                            ": " + (o.start_error.empty() ? o.status_text() : o.start_error);
            }
        if (failed.empty())
            throw_check_failed("mpirun " + (mpirun_outcome.start_error.empty() ? mpirun_outcome.status_text()
                                                                      : mpirun_outcome.start_error) +
                       " although every rank succeeded" +
                       (plan.mpirun_log.empty() ? " (its output is above)" : " (log: " + plan.mpirun_log + ")"));
        throw_check_failed(std::to_string(failed.size()) + " of " + std::to_string(outcomes.size()) + " ranks failed (" +
                   format_id_list(failed) + "); first: " + first);
    }
    if (!check.ok) throw_check_failed(check.message);
    return 0;
}

}  // namespace ipex::launch
