// ipex-launch end to end: options -> topology -> plan (placement, environment, command
// per instance) -> dry-run output, or a run with logs, summary and the oneDNN check.
#pragma once

#include <string>
#include <vector>

#include "launch/command.h"
#include "launch/env_plan.h"
#include "launch/options.h"
#include "launch/partition.h"
#include "launch/topology.h"

namespace ipex::launch {

struct InstancePlan {
    InstancePlacement placement;
    InstanceEnv env;
    std::vector<std::string> command;  // argv as run, numactl/taskset prefix included
    std::string executable;            // execve path ("" if not found in a dry run)
    std::string log_path;              // "" without --log-dir
};

struct LaunchPlan {
    Topology topology;
    int ninstances = 0;    // planned; `instances` may be a subset (--instance-idx)
    int unused_slots = 0;
    std::string slot_unit;
    RuntimeChoice runtimes;
    TaskManager task_manager = TaskManager::auto_select;
    bool membind = true;   // memory policy planned (numactl --membind, set_mempolicy)
    std::string binding;   // how instances are pinned, for people
    std::vector<InstancePlan> instances;
    std::vector<std::string> warnings;  // in the order they arose
};

// This machine, or the --topology / --synthetic one.
Topology load_topology(const LaunchOptions &opts);

// Plans every instance. Throws Error(usage/unsupported) for impossible requests.
LaunchPlan make_plan(const LaunchOptions &opts, const Topology &topo, const Environment &env);

// Log file of an instance: DIR/PREFIX_instanceI_cpusLIST.log ("0-3,8" -> "0-3_8").
std::string log_file_name(const std::string &prefix, const InstancePlacement &placement);

// Creates --log-dir and its parents. Throws Error(usage) naming --log-dir.
void make_dirs(const std::string &dir);

// Runs ipex-launch; returns the exit code (0) or throws Error (1 when an instance failed
// or --require-isa was not met, 2 usage, 3 bad input, 4 unsupported).
int run_launch(const LaunchOptions &opts);

}  // namespace ipex::launch
