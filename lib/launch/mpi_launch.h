// A multi-node run end to end: hostfile -> plan per host and rank -> host checks ->
// dry-run output, or mpirun with the rank report channel, summary, logs and checks.
#pragma once

#include <string>
#include <vector>

#include "core/errors.h"
#include "launch/mpi_plan.h"
#include "launch/options.h"

namespace ipex::launch {

// Why the run cannot start from here, one message per problem: the master address or
// the first host is not this machine (Error usage), a host does not resolve or answer
// (Error bad_input). Hosts other than the first are probed unless --skip-host-check.
struct HostCheckProblem {
    ExitCode code;
    std::string message;
};
std::vector<HostCheckProblem> check_hosts(const MultiNodePlan &plan, bool probe, int probe_timeout_ms);

// Runs a multi-node launch (or prints its plan); returns 0 or throws Error like run_launch.
int run_multi_node(const LaunchOptions &opts);

}  // namespace ipex::launch
