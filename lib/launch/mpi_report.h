// What a multi-node run prints: the plan per host and rank (text or JSON), the summary
// table across hosts and the JSON run report.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "launch/mpi_plan.h"
#include "launch/rank_collector.h"
#include "launch/report.h"

namespace ipex::launch {

nlohmann::json multi_node_plan_json(const MultiNodePlan &plan);
std::string multi_node_plan_text(const MultiNodePlan &plan);

// Table: rank, host, local rank, cpus, cores, node, pid, status, wall time, peak RSS. The
// placement is the one each rank reported from its host (the plan's when it did not).
std::string rank_summary_text(const MultiNodePlan &plan, const std::vector<RankResult> &ranks);

// The plan plus, per rank, the reported placement, pid, status, wall time, peak RSS and
// (with `with_onednn`) oneDNN statistics; mpirun's own status under "mpi".
nlohmann::json multi_node_results_json(const MultiNodePlan &plan, const std::vector<RankResult> &ranks,
                                       const InstanceOutcome &mpirun, const IsaCheck &check, bool with_onednn);

}  // namespace ipex::launch
