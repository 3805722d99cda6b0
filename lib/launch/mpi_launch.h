// A multi-node run end to end: hostfile -> plan per host and rank -> host checks ->
// dry-run output, or mpirun with the rank report channel, summary, logs and checks.
#pragma once

#include <string>
#include <vector>

#include "base/errors.h"
#include "launch/host_check.h"
#include "launch/mpi_plan.h"
#include "launch/options.h"

namespace ipex::launch {

// Why the run cannot start from here, one message per problem: the master address or
// the first host is not this machine (Error usage), a host does not resolve or answer
// (Error bad_input). Hosts other than the first are probed unless `probe` is false. The
// hosts are checked once each, concurrently, within `limits` (host_check.h); at most
// limits.max_failures host failures are listed, the others only counted.
struct HostCheckProblem {
    ExitCode code;
    std::string message;
};
struct HostCheckReport {
    std::vector<HostCheckProblem> problems;  // usage problems first, then hosts in hostfile order
    size_t more_failed = 0;                  // failed hosts beyond those listed
    size_t not_checked = 0;                  // hosts no check reached
    std::string stopped_because;             // why some were not checked

    // The first problem, with how many more failed and were not checked; "" when none.
    std::string error_message() const;
};
HostCheckReport check_hosts(const MultiNodePlan &plan, bool probe, const HostCheckLimits &limits = {},
                            HostResolver resolve = resolve_host, HostProber prober = probe_address);

// Runs a multi-node launch (or prints its plan); returns 0 or throws Error like run_launch.
int run_multi_node(const LaunchOptions &opts);

}  // namespace ipex::launch
