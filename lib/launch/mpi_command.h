// The MPI process manager a multi-node run goes through: finding Debian's Open MPI or
// MPICH launcher, and the mpirun / mpiexec command line that starts one
// `ipex-launch --rank-exec` per rank, nprocs_per_node ranks on each host in hostfile order
// (so rank = host index * nprocs_per_node + local rank).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/library_search.h"

namespace ipex::launch {

enum class MpiKind { auto_select, openmpi, mpich };

const std::map<std::string, MpiKind> &mpi_names();

// Launcher names searched in PATH, in order, and the Debian package of each kind.
const std::vector<std::string> &mpi_launcher_names(MpiKind kind);
std::string mpi_package(MpiKind kind);

struct MpiLauncher {
    MpiKind kind = MpiKind::openmpi;  // never auto_select
    std::string path;                 // "" when not found (dry runs only)
};

// The launcher of `wanted` (auto: Open MPI, else MPICH). nullopt when none is found.
std::optional<MpiLauncher> find_mpi(MpiKind wanted, const std::string &path_var);

// Message for a missing launcher, naming the names searched and the Debian package.
std::string mpi_not_found(MpiKind wanted);

struct MpiCommandRequest {
    MpiLauncher launcher;
    std::vector<std::string> hosts;        // in rank order
    int nprocs_per_node = 1;
    bool as_root = false;                  // Open MPI refuses root without --allow-run-as-root
    std::vector<std::string> forward_env;  // variable names passed on to every rank
    std::vector<std::string> extra;        // --extra-mpi-params, split
    std::vector<std::string> rank_command; // what each rank runs
};

// mpirun.openmpi --host h0:P,h1:P -np N*P --map-by ppr:P:node --bind-to none
//   [--allow-run-as-root] [-x NAME]... EXTRA... RANK_COMMAND
// mpiexec.hydra -hosts h0:P,h1:P -n N*P -ppn P -bind-to none [-genvlist A,B] EXTRA... RANK_COMMAND
std::vector<std::string> build_mpi_command(const MpiCommandRequest &req);

// Splits --extra-mpi-params like a POSIX shell does words: blanks separate, '...' and
// "..." quote, backslash escapes. Throws Error(usage) on an unterminated quote.
std::vector<std::string> split_mpi_params(const std::string &text);

// Names of the variables of `env` a rank must see as on this host: PATH, LD_LIBRARY_PATH,
// LD_PRELOAD, PYTHONPATH, MALLOC_CONF, TCMALLOC_* and the OMP_, KMP_, GOMP_, ONEDNN_,
// DNNL_, GLOO_, TP_, TORCH_, CCL_, FI_ and I_MPI_ families, in name order.
std::vector<std::string> forwarded_variables(const Environment &env);

}  // namespace ipex::launch
