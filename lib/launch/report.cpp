#include "launch/report.h"

#include <cstdio>
#include <sstream>

#include "base/text.h"
#include "launch/id_list.h"
#include "base/isa_check.h"

namespace ipex::launch {

std::string percent(double share) { return fixed_text(100.0 * share, 1) + "%"; }

std::string human_kib(long kib) {
    if (kib < 1024) return std::to_string(kib) + " KiB";
    if (kib < 1024L * 1024) return fixed_text(static_cast<double>(kib) / 1024.0, 1) + " MiB";
    return fixed_text(static_cast<double>(kib) / (1024.0 * 1024.0), 2) + " GiB";
}

// Left-aligned columns separated by two spaces.
std::string render_table(const std::vector<std::vector<std::string>> &rows, const std::string &indent) {
    std::vector<size_t> width;
    for (const auto &row : rows)
        for (size_t c = 0; c < row.size(); ++c) {
            if (width.size() <= c) width.push_back(0);
            width[c] = std::max(width[c], row[c].size());
        }
    std::string out;
    for (const auto &row : rows) {
        std::string line = indent;
        for (size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
        }
        out += line + "\n";
    }
    return out;
}

namespace {

std::string plural(int n, const std::string &word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

nlohmann::json topology_json(const Topology &t) {
    int e_cores = 0;
    for (const auto &c : t.cores) e_cores += c.efficiency ? 1 : 0;
    return {{"source", t.source},        {"packages", t.packages},
            {"numa_nodes", t.numa_nodes}, {"cores", t.cores.size()},
            {"cpus", t.cpu_count()},      {"smt", t.max_smt()},
            {"hybrid", t.hybrid},         {"e_cores", e_cores},
            {"disallowed_cpus", t.disallowed_cpus}};
}

nlohmann::json instance_json(const InstancePlan &ip) {
    nlohmann::json kept = nlohmann::json::object();
    for (const auto &[name, value] : ip.env.kept) kept[name] = value;
    return {{"index", ip.placement.index},
            {"cpus", ip.placement.cpus},
            {"cores", ip.placement.cores},
            {"numa_nodes", ip.placement.numa_nodes},
            {"packages", ip.placement.packages},
            {"e_cores", ip.placement.efficiency_cores},
            {"env", ip.env.set},
            {"env_kept", kept},
            {"ld_preload", ip.env.ld_preload},
            {"command", ip.command},
            {"executable", ip.executable},
            {"log_file", ip.log_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(ip.log_path)}};
}

std::string shell_join(const std::vector<std::string> &argv) {
    std::string out;
    for (const auto &arg : argv) {
        const bool plain = !arg.empty() && arg.find_first_not_of(
                               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                               "-_./=:,+@%") == std::string::npos;
        std::string quoted = arg;
        if (!plain) {
            quoted = "'";
            for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
            quoted += "'";
        }
        out += (out.empty() ? "" : " ") + quoted;
    }
    return out;
}

IsaCheck check_isa(const std::vector<InstanceOutcome> &outcomes, const std::string &isa,
                   double min_share, const std::string &unit) {
    IsaCheck check;
    check.requested = true;
    check.isa = isa;
    check.min_share = min_share;
    std::string failures;
    for (const auto &o : outcomes) {
        const double share = compute_share_satisfying(o.verbose, isa);
        const bool passed = o.verbose.has_compute() && share + 1e-12 >= min_share;
        check.shares.push_back(share);
        check.passed.push_back(passed);
        if (passed) continue;
        check.ok = false;
        failures += (failures.empty() ? "" : "; ") + unit + " " + std::to_string(o.index);
        if (!o.verbose.has_compute()) {
            failures += " ran no oneDNN convolution/matmul";
        } else {
            failures += " ran " + percent(share) + " on it (";
            std::string isas;
            for (const auto &i : o.verbose.compute_isas()) isas += (isas.empty() ? "" : ", ") + i;
            failures += isas + ")";
        }
    }
    if (!check.ok)
        check.message = "--require-isa " + isa + " not met (each " + unit + " needs " + percent(min_share) +
                        " of its convolution/matmul time on it): " + failures;
    return check;
}

nlohmann::json plan_json(const LaunchPlan &plan) {
    nlohmann::json instances = nlohmann::json::array();
    for (const auto &ip : plan.instances) instances.push_back(instance_json(ip));
    return {{"topology", topology_json(plan.topology)},
            {"ninstances", plan.ninstances},
            {"slot_unit", plan.slot_unit},
            {"unused", plan.unused_slots},
            {"binding", plan.binding},
            {"allocator", {{"name", plan.runtimes.allocator},
                           {"library", plan.runtimes.allocator_library},
                           {"from_ld_preload", plan.runtimes.allocator_from_user}}},
            {"openmp", {{"runtime", plan.runtimes.omp},
                        {"library", plan.runtimes.omp_library},
                        {"from_ld_preload", plan.runtimes.omp_from_user}}},
            {"instances", instances},
            {"warnings", plan.warnings}};
}

std::string plan_text(const LaunchPlan &plan) {
    const Topology &t = plan.topology;
    std::ostringstream out;
    out << "topology: " << t.source << ": " << plural(t.packages, "package") << ", "
        << plural(static_cast<int>(t.numa_nodes.size()), "NUMA node") << " ("
        << format_id_list(t.numa_nodes) << "), " << plural(static_cast<int>(t.cores.size()), "usable core")
        << ", " << plural(t.cpu_count(), "usable CPU") << " (SMT " << t.max_smt() << ")"
        << (t.hybrid ? ", hybrid P/E" : "") << "\n";
    out << "plan: " << plural(plan.ninstances, "instance") << ", " << plural(plan.unused_slots, plan.slot_unit)
        << " unused; binding: " << plan.binding << "\n";
    out << "allocator: " << plan.runtimes.allocator
        << (plan.runtimes.allocator_library.empty() ? "" : " (" + plan.runtimes.allocator_library + ")")
        << (plan.runtimes.allocator_from_user ? " (from LD_PRELOAD)" : "") << "; OpenMP: "
        << plan.runtimes.omp
        << (plan.runtimes.omp_library.empty() ? "" : " (" + plan.runtimes.omp_library + ")")
        << (plan.runtimes.omp_from_user ? " (from LD_PRELOAD)" : "") << "\n";
    for (const auto &ip : plan.instances) {
        const auto &p = ip.placement;
        out << "\ninstance " << p.index << ": cpus " << format_id_list(p.cpus) << ", cores "
            << format_id_list(p.cores) << ", NUMA node " << format_id_list(p.numa_nodes) << "\n";
        std::vector<std::vector<std::string>> rows;
        for (const auto &[name, value] : ip.env.set) rows.push_back({name, value});
        for (const auto &[name, value] : ip.env.kept) rows.push_back({name, value + "  (kept from the environment)"});
        out << "  environment:\n";
        for (const auto &row : rows) out << "    " << row[0] << "=" << row[1] << "\n";
        out << "  command: " << shell_join(ip.command) << "\n";
        if (!ip.log_path.empty()) out << "  log: " << ip.log_path << "\n";
    }
    return out.str();
}

std::string summary_text(const LaunchPlan &plan, const std::vector<InstanceOutcome> &outcomes) {
    std::vector<std::vector<std::string>> rows{
        {"instance", "cpus", "cores", "node", "pid", "status", "wall", "peak RSS"}};
    for (size_t i = 0; i < outcomes.size(); ++i) {
        const auto &o = outcomes[i];
        const auto &p = plan.instances[i].placement;
        rows.push_back({std::to_string(o.index), format_id_list(p.cpus), format_id_list(p.cores),
                        format_id_list(p.numa_nodes), o.pid > 0 ? std::to_string(o.pid) : "-",
                        o.start_error.empty() ? o.status_text() : "not started",
                        fixed_text(o.wall_seconds, 3) + " s", human_kib(o.peak_rss_kib)});
    }
    return "ipex-launch summary:\n" + render_table(rows, "  ");
}

std::string verbose_text(const std::vector<InstanceOutcome> &outcomes, const IsaCheck &check,
                         const std::string &unit) {
    std::ostringstream out;
    for (size_t i = 0; i < outcomes.size(); ++i) {
        const auto &o = outcomes[i];
        const auto &v = o.verbose;
        out << "oneDNN, " << unit << " " << o.index << ": AMX: " << (v.used_amx() ? "yes" : "no");
        if (!o.verbose_info.version.empty()) out << "; oneDNN " << o.verbose_info.version;
        if (!o.verbose_info.isa.empty()) out << "; " << o.verbose_info.isa;
        out << "\n";
        if (v.exec_lines == 0) {
            out << "  no oneDNN primitive ran (no exec lines in its output)\n";
        } else {
            std::vector<std::vector<std::string>> rows{{"kind", "implementation", "count", "time (ms)", "share"}};
            for (const auto &[key, entry] : v.by_kind_impl)
                rows.push_back({key.first, key.second, std::to_string(entry.count), fixed_text(entry.ms, 3),
                                percent(v.total_ms > 0 ? entry.ms / v.total_ms : 0.0)});
            out << render_table(rows, "  ");
        }
        if (check.requested)
            out << "  --require-isa " << check.isa << ": " << percent(check.shares[i])
                << " of convolution/matmul time (needs " << percent(check.min_share) << "): "
                << (check.passed[i] ? "ok" : "NOT MET") << "\n";
    }
    return out.str();
}

nlohmann::json exit_code_json(const InstanceOutcome &o) {
    return o.start_error.empty() && o.signal == 0 ? nlohmann::json(o.exit_code) : nlohmann::json(nullptr);
}

bool outcome_json(const InstanceOutcome &o, const IsaCheck &check, size_t index, bool with_onednn,
                  nlohmann::json &j) {
    j["pid"] = o.pid;
    j["status"] = o.status_text();
    j["exit_code"] = exit_code_json(o);
    j["signal"] = o.signal ? nlohmann::json(o.signal) : nlohmann::json(nullptr);
    j["timed_out"] = o.timed_out;
    j["start_error"] = o.start_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.start_error);
    j["wall_seconds"] = o.wall_seconds;
    j["peak_rss_kib"] = o.peak_rss_kib;
    j["membind_refused"] = o.membind_errno != 0;
    j["ok"] = o.ok();
    if (with_onednn) {
        j["onednn"] = o.verbose.to_json();
        j["onednn"]["version"] = o.verbose_info.version;
        j["onednn"]["isa_info"] = o.verbose_info.isa;
    }
    if (check.requested) j["require_isa"] = {{"share", check.shares[index]}, {"ok", bool(check.passed[index])}};
    return o.ok();
}

nlohmann::json results_json(const LaunchPlan &plan, const std::vector<InstanceOutcome> &outcomes,
                            const IsaCheck &check, bool with_onednn) {
    nlohmann::json report = plan_json(plan);
    bool ok = check.ok;
    for (size_t i = 0; i < outcomes.size(); ++i) {
        ok = outcome_json(outcomes[i], check, i, with_onednn, report["instances"][i]) && ok;
    }
    if (check.requested)
        report["require_isa"] = {{"isa", check.isa}, {"min_share", check.min_share}, {"ok", check.ok}};
    report["ok"] = ok;
    return report;
}

}  // namespace ipex::launch
