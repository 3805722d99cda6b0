// What ipex-launch prints: the dry-run plan (text or JSON), the summary table, the
// per-instance oneDNN table, the --require-isa verdict and the JSON run report.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "launch/launch.h"
#include "launch/runner.h"

namespace ipex::launch {

struct IsaCheck {
    bool requested = false;
    std::string isa;             // canonical oneDNN name
    double min_share = 0.0;
    bool ok = true;
    std::vector<double> shares;  // per outcome: compute time share on `isa`
    std::vector<bool> passed;
    std::string message;         // why it failed
};

// Each instance must run at least `min_share` of its compute time on `isa`.
// `unit` names an outcome in messages ("instance", or "rank" in a multi-node run).
IsaCheck check_isa(const std::vector<InstanceOutcome> &outcomes, const std::string &isa,
                   double min_share, const std::string &unit = "instance");

nlohmann::json plan_json(const LaunchPlan &plan);
std::string plan_text(const LaunchPlan &plan);

// Table: instance, cpus, cores, nodes, pid, status, wall time, peak RSS.
std::string summary_text(const LaunchPlan &plan, const std::vector<InstanceOutcome> &outcomes);

// Per instance: primitive kind x implementation with counts, time and share; AMX yes/no.
std::string verbose_text(const std::vector<InstanceOutcome> &outcomes, const IsaCheck &check,
                         const std::string &unit = "instance");

// The plan plus, per instance, pid, status, wall time, peak RSS and (with `with_onednn`)
// the oneDNN statistics.
nlohmann::json results_json(const LaunchPlan &plan, const std::vector<InstanceOutcome> &outcomes,
                            const IsaCheck &check, bool with_onednn);

// Building blocks shared with the multi-node report (mpi_report.h).
std::string percent(double share);
std::string human_kib(long kib);
// Left-aligned columns separated by two spaces, each line starting with `indent`.
std::string render_table(const std::vector<std::vector<std::string>> &rows, const std::string &indent);
nlohmann::json topology_json(const Topology &t);
nlohmann::json instance_json(const InstancePlan &ip);
// A process's exit code as the reports give it: null where it did not start or a signal ended it.
nlohmann::json exit_code_json(const InstanceOutcome &o);
// What one instance (or rank) did, into its entry j of the report: pid, status, exit code or
// signal, wall time, peak RSS, its --require-isa share, and the oneDNN statistics with
// `with_onednn`. Returns whether it ran through (the check is the caller's to weigh).
bool outcome_json(const InstanceOutcome &o, const IsaCheck &check, size_t index, bool with_onednn,
                  nlohmann::json &j);

// "a b 'c d'": argv quoted for a POSIX shell.
std::string shell_join(const std::vector<std::string> &argv);

}  // namespace ipex::launch
