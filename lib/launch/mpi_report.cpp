#include "launch/mpi_report.h"

#include <sstream>

#include "base/text.h"
#include "launch/id_list.h"

namespace ipex::launch {
namespace {

const InstancePlacement &placement_of(const MultiNodePlan &plan, const std::vector<RankResult> &ranks, size_t i) {
    return i < ranks.size() && ranks[i].started && !ranks[i].placement.cpus.empty()
               ? ranks[i].placement
               : plan.ranks[i].instance.placement;
}

}  // namespace

nlohmann::json multi_node_plan_json(const MultiNodePlan &plan) {
    const LaunchPlan &hp = plan.host_plan;
    nlohmann::json hosts = nlohmann::json::array();
    for (size_t h = 0; h < plan.hosts.size(); ++h) {
        std::vector<int> ranks;
        for (const auto &r : plan.ranks)
            if (r.host_index == static_cast<int>(h)) ranks.push_back(r.rank);
        const auto &e = plan.hosts[h];
        hosts.push_back({{"index", h},
                         {"name", e.name},
                         {"slots", e.slots ? nlohmann::json(e.slots) : nlohmann::json(nullptr)},
                         {"hostfile_line", e.line ? nlohmann::json(e.line) : nlohmann::json(nullptr)},
                         {"ranks", ranks}});
    }
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto &r : plan.ranks) {
        nlohmann::json j = instance_json(r.instance);
        j["rank"] = r.rank;
        j["host"] = r.host;
        j["host_index"] = r.host_index;
        j["local_rank"] = r.local_rank;
        ranks.push_back(j);
    }
    return {{"mode", "multi-node"},
            {"topology", topology_json(hp.topology)},
            {"nnodes", plan.nnodes},
            {"nprocs_per_node", plan.nprocs_per_node},
            {"world_size", plan.world_size},
            {"master_addr", plan.master_addr},
            {"master_port", plan.master_port},
            {"hostfile", plan.hostfile.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.hostfile)},
            {"hosts", hosts},
            {"mpi", {{"implementation", name_of(mpi_names(), plan.mpi.kind)},
                     {"launcher", plan.mpi_found ? nlohmann::json(plan.mpi.path) : nlohmann::json(nullptr)},
                     {"command", plan.mpi_command},
                     {"forwarded_env", plan.forwarded},
                     {"log_file", plan.mpirun_log.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.mpirun_log)}}},
            {"slot_unit", hp.slot_unit},
            {"unused_per_host", hp.unused_slots},
            {"binding", hp.binding},
            {"allocator", {{"name", hp.runtimes.allocator},
                           {"library", hp.runtimes.allocator_library},
                           {"from_ld_preload", hp.runtimes.allocator_from_user}}},
            {"openmp", {{"runtime", hp.runtimes.omp},
                        {"library", hp.runtimes.omp_library},
                        {"from_ld_preload", hp.runtimes.omp_from_user}}},
            {"ranks", ranks},
            {"warnings", plan.warnings}};
}

std::string multi_node_plan_text(const MultiNodePlan &plan) {
    const LaunchPlan &hp = plan.host_plan;
    const Topology &t = hp.topology;
    std::ostringstream out;
    out << "topology (every host): " << t.source << ": " << t.packages << " package(s), "
        << t.numa_nodes.size() << " NUMA node(s), " << t.cores.size() << " usable core(s), " << t.cpu_count()
        << " usable CPU(s)\n";
    out << "plan: " << plan.nnodes << " host(s) x " << plan.nprocs_per_node << " rank(s) = world size "
        << plan.world_size << "; master " << plan.master_addr << ":" << plan.master_port << "; " << hp.unused_slots
        << " " << hp.slot_unit << "(s) unused per host; binding: " << hp.binding << "\n";
    out << "allocator: " << hp.runtimes.allocator
        << (hp.runtimes.allocator_library.empty() ? "" : " (" + hp.runtimes.allocator_library + ")")
        << "; OpenMP: " << hp.runtimes.omp
        << (hp.runtimes.omp_library.empty() ? "" : " (" + hp.runtimes.omp_library + ")") << "\n";
    out << "mpi: " << name_of(mpi_names(), plan.mpi.kind) << " ("
        << (plan.mpi_found ? plan.mpi.path : std::string("not found")) << ")\n";
    out << "  command: " << shell_join(plan.mpi_command) << "\n";
    for (const auto &r : plan.ranks) {
        const auto &p = r.instance.placement;
        out << "\nrank " << r.rank << " on " << r.host << " (host " << r.host_index << ", local rank " << r.local_rank
            << "): cpus " << format_id_list(p.cpus) << ", cores " << format_id_list(p.cores) << ", NUMA node "
            << format_id_list(p.numa_nodes) << "\n";
        out << "  environment:\n";
        for (const auto &[name, value] : r.instance.env.set) out << "    " << name << "=" << value << "\n";
        for (const auto &[name, value] : r.instance.env.kept)
            out << "    " << name << "=" << value << "  (kept from the environment)\n";
        out << "  command: " << shell_join(r.instance.command) << "\n";
        if (!r.instance.log_path.empty()) out << "  log: " << r.instance.log_path << "\n";
    }
    return out.str();
}

std::string rank_summary_text(const MultiNodePlan &plan, const std::vector<RankResult> &ranks) {
    std::vector<std::vector<std::string>> rows{
        {"rank", "host", "local", "cpus", "cores", "node", "pid", "status", "wall", "peak RSS"}};
    for (size_t i = 0; i < plan.ranks.size(); ++i) {
        const auto &r = plan.ranks[i];
        const auto &p = placement_of(plan, ranks, i);
        const InstanceOutcome &o = ranks[i].outcome;
        rows.push_back({std::to_string(r.rank), r.host, std::to_string(r.local_rank), format_id_list(p.cpus),
                        format_id_list(p.cores), format_id_list(p.numa_nodes),
                        o.pid > 0 ? std::to_string(o.pid) : "-",
                        o.start_error.empty() ? o.status_text() : "not started", fixed_text(o.wall_seconds, 3) + " s",
                        human_kib(o.peak_rss_kib)});
    }
    return "ipex-launch summary:\n" + render_table(rows, "  ");
}

nlohmann::json multi_node_results_json(const MultiNodePlan &plan, const std::vector<RankResult> &ranks,
                                       const InstanceOutcome &mpirun, const IsaCheck &check, bool with_onednn) {
    nlohmann::json report = multi_node_plan_json(plan);
    bool ok = check.ok && mpirun.ok();
    for (size_t i = 0; i < plan.ranks.size(); ++i) {
        const RankResult &r = ranks[i];
        const InstanceOutcome &o = r.outcome;
        auto &j = report["ranks"][i];
        const auto &p = placement_of(plan, ranks, i);
        j["cpus"] = p.cpus;
        j["cores"] = p.cores;
        j["numa_nodes"] = p.numa_nodes;
        j["packages"] = p.packages;
        j["hostname"] = r.hostname.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.hostname);
        ok = outcome_json(o, check, i, with_onednn, j) && ok;
    }
    report["mpi"]["status"] = mpirun.status_text();
    report["mpi"]["exit_code"] = exit_code_json(mpirun);
    report["mpi"]["wall_seconds"] = mpirun.wall_seconds;
    if (check.requested)
        report["require_isa"] = {{"isa", check.isa}, {"min_share", check.min_share}, {"ok", check.ok}};
    report["ok"] = ok;
    return report;
}

}  // namespace ipex::launch
