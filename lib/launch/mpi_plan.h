// The plan of a multi-node run: every host runs nprocs_per_node ranks, and each rank gets
// the placement, allocator, OpenMP and memory policy of a local instance (the host's cores
// split among its ranks) plus the variables torch.distributed reads from the environment.
// The launching host plans with its own topology (or --topology/--synthetic) for every
// host; on each host the rank (`ipex-launch --rank-exec`) plans again with that host's
// topology, so hosts that differ still get their own cores split.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launch/hostfile.h"
#include "launch/launch.h"
#include "launch/mpi_command.h"
#include "launch/options.h"

namespace ipex::launch {

struct RankIdentity {
    int rank = 0;
    int world_size = 1;
    int local_rank = 0;
    int local_world_size = 1;
};

// From the variables the MPI process manager sets: Open MPI's OMPI_COMM_WORLD_RANK,
// _SIZE, _LOCAL_RANK, _LOCAL_SIZE or MPICH's PMI_RANK, PMI_SIZE, MPI_LOCALRANKID,
// MPI_LOCALNRANKS. nullopt when neither set is there. Throws Error(usage) for values
// that are not numbers or do not fit together.
std::optional<RankIdentity> rank_identity(const Environment &env);

// MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (always set,
// replacing the environment's) and IPEX_LAUNCH_RANK / IPEX_LAUNCH_NNODES.
void add_rank_variables(InstanceEnv &env, const RankIdentity &id, const std::string &master_addr,
                        int master_port, int nnodes);

// The options one host plans with: the single-host options of `opts`, with
// nprocs_per_node instances and no multi-node settings.
LaunchOptions host_options(const LaunchOptions &opts, int nprocs_per_node);

// argv of the rank program mpirun starts: SELF --rank-exec with the multi-node settings,
// the placement/runtime options that differ from the defaults, then -- PROGRAM ARGS.
std::vector<std::string> rank_exec_command(const LaunchOptions &opts, const std::string &self,
                                           const std::vector<std::string> &hosts, int nprocs_per_node,
                                           const std::string &master_addr, const std::string &report_to);

// PREFIX_rankR_HOST.log (characters other than letters, digits, '.', '-' and '_' become '_').
std::string rank_log_file_name(const std::string &prefix, int rank, const std::string &host);

struct RankPlan {
    int rank = 0;
    int host_index = 0;
    int local_rank = 0;
    std::string host;
    InstancePlan instance;  // placement, environment (with the rank variables), command, log
};

struct MultiNodePlan {
    LaunchPlan host_plan;          // one host's plan: nprocs_per_node instances
    std::vector<HostEntry> hosts;  // the hosts that run ranks, in rank order
    std::string hostfile;          // "" when there is none
    int nnodes = 1;
    int nprocs_per_node = 1;
    int world_size = 1;
    std::string master_addr;
    int master_port = 29500;
    bool mpi_found = false;
    MpiLauncher mpi;
    std::vector<std::string> mpi_command;
    std::vector<std::string> forwarded;  // variables passed on to the ranks
    std::vector<RankPlan> ranks;
    std::string mpirun_log;              // "" without --log-dir
    std::vector<std::string> warnings;
};

// Plans the run. `hosts` holds the hostfile's hosts ({"localhost"} without one);
// Ranks report to MASTER_ADDR:report_port with report_token (rank_report.h). Throws Error(usage) when there are fewer hosts
// than --nnodes, a host has fewer slots than --nprocs-per-node, or a host's plan fails.
MultiNodePlan make_multi_node_plan(const LaunchOptions &opts, const Topology &topo, const Environment &env,
                                   const std::vector<HostEntry> &hosts, const std::string &self,
                                   const std::string &report_port, const std::string &report_token);

}  // namespace ipex::launch
