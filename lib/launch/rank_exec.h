// `ipex-launch --rank-exec`: what mpirun starts on each host for one rank of a multi-node
// run. Reads its rank from the MPI process manager's variables, plans this host's
// nprocs_per_node instances with this host's topology, runs the one of its local rank
// pinned as a local instance would be, with the torch.distributed variables set, and
// sends its output and exit status to the launcher (--report). Without a report channel
// it writes the output itself, each line prefixed "[host:rank] ".
#pragma once

#include "launch/options.h"

namespace ipex::launch {

// Returns the program's exit code (128 + signal when a signal ended it, 127 when it did
// not start). Throws Error(usage) when not started by an MPI process manager.
int run_rank(const LaunchOptions &opts);

}  // namespace ipex::launch
