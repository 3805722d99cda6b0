// Everything ipex-launch can be asked to do, as parsed from the command line. The
// launcher's main fills this struct from its option table; lib/launch validates it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/binding.h"
#include "launch/env_plan.h"
#include "launch/mpi_command.h"
#include "launch/partition.h"

namespace ipex::launch {

struct LaunchOptions {
    // Topology (default: this machine).
    std::string topology_xml;  // --topology FILE.xml
    std::string synthetic;     // --synthetic "package:2 numa:1 core:28 pu:2"

    // Partitioning. The count options are empty when not given (count_options() checks them).
    std::optional<int> ninstances;
    std::optional<int> ncores_per_instance;
    std::string instance_idx;  // list text, "" for all
    Strategy strategy = Strategy::close;
    bool bind_numa_node = false;
    bool use_logical_cores = false;
    bool use_e_cores = false;
    std::string cores_list, cpus_list, nodes_list;
    bool latency_mode = false;
    bool throughput_mode = false;

    // Binding, allocator, OpenMP.
    TaskManager task_manager = TaskManager::auto_select;
    Allocator allocator = Allocator::auto_select;
    bool benchmark = false;
    OmpRuntime omp = OmpRuntime::auto_select;

    // Program.
    bool module = false;
    bool no_python = false;
    std::string python = "python3";
    std::vector<std::string> command;

    // Running and reporting.
    std::string log_dir;
    std::string log_file_prefix = "run";
    bool onednn_verbose = false;
    std::string require_isa;
    double require_isa_share = 0.9;
    double timeout_seconds = 0;
    bool dry_run = false;
    bool json = false;
    bool quiet = false;
    bool verbose = false;

    // Multi-node runs through an MPI process manager (any of the first three turns it on).
    std::optional<int> nnodes;           // not given: every host of the hostfile (1 without one)
    std::optional<int> nprocs_per_node;  // not given: one rank per NUMA node
    std::string hostfile;
    std::string master_addr;  // "": the first host (127.0.0.1 without a hostfile)
    int master_port = 29500;
    MpiKind mpi = MpiKind::auto_select;
    std::string extra_mpi_params;
    bool skip_host_check = false;

    // Internal: what mpirun starts on each host for one rank (hidden options).
    bool rank_exec = false;
    std::string report_to;   // ADDR:PORT:TOKEN of the launcher's report listener
    std::string rank_hosts;  // host names in rank order, comma-separated (for labels)

    bool multi_node() const { return nnodes || nprocs_per_node || !hostfile.empty(); }
};

// Choice names as written on the command line (the man page lists the same).
const std::map<std::string, Strategy> &strategy_names();
const std::map<std::string, TaskManager> &task_manager_names();
const std::map<std::string, Allocator> &allocator_names();
const std::map<std::string, OmpRuntime> &omp_runtime_names();

template <typename E>
std::string name_of(const std::map<std::string, E> &names, E value) {
    for (const auto &[name, v] : names)
        if (v == value) return name;
    return "?";
}

// The count options, one rule for all: a count given on the command line is a whole number
// of 1 or more (leaving the option out picks the default); `modes` are the other values an
// option takes with a meaning of their own (--ncores-per-instance's 0 and -1, as in IPEX).
struct CountOption {
    const char *flag;
    std::optional<int> LaunchOptions::*field;
    std::map<int, std::string> modes;  // value -> what it means
    std::string when_left_out;         // the default, for the message
};
const std::vector<CountOption> &count_options();

// Throws Error(usage) naming the flag, the value and what it takes, for the first count
// option given with a value the rule above refuses.
void check_counts(const LaunchOptions &opts);

// Cross-option checks that do not need the topology (check_counts included). Throws Error(usage).
void validate(const LaunchOptions &opts);

// The multi-node options against each other and the single-host ones (check_counts and
// the host-name rule of --master-addr included). Throws Error(usage).
void validate_multi_node(const LaunchOptions &opts);

// The partitioning part of the options, lists parsed. Throws Error(usage).
PartitionRequest partition_request(const LaunchOptions &opts);

}  // namespace ipex::launch
