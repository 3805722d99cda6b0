// Environment planning: which allocator and OpenMP runtime each instance gets, the
// variables that tune them, and the final LD_PRELOAD. Variables the user already set
// are kept (and reported); LD_PRELOAD entries of the user are kept after ours.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launch/library_search.h"
#include "launch/partition.h"

namespace ipex::launch {

enum class Allocator { auto_select, system, jemalloc, tcmalloc };
enum class OmpRuntime { auto_select, system, intel };

// jemalloc MALLOC_CONF for inference (freed pages kept for 10 s, purged by a background
// thread, no separate arena for large tensors) and for --benchmark (never purged).
extern const char *const kJemallocConfInference;
extern const char *const kJemallocConfBenchmark;
// KMP_BLOCKTIME for the Intel-compatible runtime: ms a thread spins before sleeping.
extern const char *const kKmpBlocktime;
// gperftools prints a line for every allocation above this many bytes; 1 TiB silences it.
extern const char *const kTcmallocReportThreshold;

struct EnvRequest {
    Allocator allocator = Allocator::auto_select;
    bool benchmark = false;
    OmpRuntime omp = OmpRuntime::auto_select;
    bool onednn_verbose = false;
    std::vector<std::string> library_dirs;  // where to look for the libraries
};

// Decisions shared by all instances.
struct RuntimeChoice {
    std::string allocator = "default";  // default, jemalloc, tcmalloc
    std::string allocator_library;      // path we preload, "" when none
    bool allocator_from_user = false;   // the user's LD_PRELOAD already holds it
    std::string omp = "gnu";            // gnu (the program's own runtime) or intel
    std::string omp_library;            // path we preload, "" when none
    bool omp_from_user = false;
    std::vector<std::string> warnings;
};

// Throws Error(unsupported) when a library asked for by name is missing; in auto mode a
// missing library is a warning naming the Debian package.
RuntimeChoice choose_runtimes(const EnvRequest &req, const Environment &base);

struct InstanceEnv {
    std::map<std::string, std::string> set;   // variables the launcher sets (incl. LD_PRELOAD)
    std::map<std::string, std::string> kept;  // name -> user's value, kept instead of ours
    std::map<std::string, std::string> wanted;  // name -> value we would have set when kept
    std::vector<std::string> ld_preload;      // final LD_PRELOAD entries, in order
};

InstanceEnv plan_instance_env(const RuntimeChoice &choice, const EnvRequest &req,
                              const Environment &base, const InstancePlacement &placement,
                              int ninstances);

// One warning per variable kept across `envs`.
std::vector<std::string> kept_variable_warnings(const std::vector<InstanceEnv> &envs);

// base with `env.set` applied.
Environment apply_env(const Environment &base, const InstanceEnv &env);

}  // namespace ipex::launch
