#include "launch/env_plan.h"

#include <climits>
#include <cstdlib>

#include "base/errors.h"
#include "base/log.h"
#include "launch/id_list.h"

namespace ipex::launch {

const char *const kJemallocConfInference =
    "background_thread:true,metadata_thp:auto,oversize_threshold:0,"
    "dirty_decay_ms:10000,muzzy_decay_ms:10000";
const char *const kJemallocConfBenchmark =
    "background_thread:true,metadata_thp:auto,oversize_threshold:0,"
    "dirty_decay_ms:-1,muzzy_decay_ms:-1";
const char *const kKmpBlocktime = "1";
const char *const kTcmallocReportThreshold = "1099511627776";

namespace {

// Library names in preference order, and the Debian package that installs the first.
struct LibrarySpec {
    const char *what;
    std::vector<std::string> names;
    const char *package;
};

const LibrarySpec kTcmalloc{"tcmalloc",
                            {"libtcmalloc.so.4", "libtcmalloc.so", "libtcmalloc_minimal.so.4",
                             "libtcmalloc_minimal.so"},
                            "libgoogle-perftools4 (or libtcmalloc-minimal4)"};
const LibrarySpec kJemalloc{"jemalloc", {"libjemalloc.so.2", "libjemalloc.so"}, "libjemalloc2"};
const LibrarySpec kIntelOmp{"an Intel-compatible OpenMP runtime",
                            {"libiomp5.so", "libomp.so.5", "libomp.so"},
                            "libomp5-14 (LLVM's Intel-compatible runtime) or intel-openmp"};

std::string basename_of(const std::string &path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "jemalloc", "tcmalloc", "intel" or "" for an LD_PRELOAD entry.
std::string library_kind(const std::string &entry) {
    const std::string base = basename_of(entry);
    if (base.rfind("libjemalloc", 0) == 0) return "jemalloc";
    if (base.rfind("libtcmalloc", 0) == 0) return "tcmalloc";
    if (base.rfind("libiomp5", 0) == 0 || base.rfind("libomp.so", 0) == 0) return "intel";
    return "";
}

std::string user_preload_of_kind(const Environment &base, const std::string &kind) {
    auto it = base.find("LD_PRELOAD");
    if (it == base.end()) return "";
    for (const auto &entry : split_preload(it->second))
        if (library_kind(entry) == kind) return entry;
    return "";
}

std::string join(const std::vector<std::string> &items, const std::string &sep) {
    std::string out;
    for (const auto &item : items) out += (out.empty() ? "" : sep) + item;
    return out;
}

std::string not_found(const LibrarySpec &spec, const std::vector<std::string> &dirs) {
    return spec.what + std::string(" (") + join(spec.names, ", ") + ") was not found in " +
           join(dirs, ":") + "; install the Debian package " + spec.package +
           " or add its directory to LD_LIBRARY_PATH";
}

bool same_file(const std::string &a, const std::string &b) {
    if (a == b) return true;
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a.c_str(), ra) && realpath(b.c_str(), rb) && std::string(ra) == rb;
}

// Values of ONEDNN_VERBOSE that already print exec lines with timings.
bool prints_exec_lines(const std::string &value) {
    for (const char *ok : {"1", "2", "profile_exec", "profile", "all"})
        for (size_t pos = 0; (pos = value.find(ok, pos)) != std::string::npos; ++pos) {
            const size_t end = pos + std::string(ok).size();
            const bool starts = pos == 0 || value[pos - 1] == ',';
            const bool ends = end == value.size() || value[end] == ',';
            if (starts && ends) return true;
        }
    return false;
}

void choose_allocator(const EnvRequest &req, const Environment &base, RuntimeChoice &out) {
    if (req.allocator == Allocator::system) return;
    if (req.allocator == Allocator::auto_select) {
        for (const char *kind : {"tcmalloc", "jemalloc"}) {
            if (!user_preload_of_kind(base, kind).empty()) {
                out.allocator = kind;
                out.allocator_from_user = true;
                return;
            }
        }
        // --benchmark has a jemalloc setting, so it prefers jemalloc.
        const auto order = req.benchmark ? std::vector<const LibrarySpec *>{&kJemalloc, &kTcmalloc}
                                         : std::vector<const LibrarySpec *>{&kTcmalloc, &kJemalloc};
        for (const LibrarySpec *spec : order) {
            if (auto path = find_library(spec->names, req.library_dirs)) {
                out.allocator = spec->what;
                out.allocator_library = *path;
                return;
            }
        }
        out.warnings.push_back("--memory-allocator auto: neither tcmalloc nor jemalloc was found; "
                               "using the default allocator (install the Debian package "
                               "libgoogle-perftools4 or libjemalloc2)");
        return;
    }
    const LibrarySpec &spec = req.allocator == Allocator::jemalloc ? kJemalloc : kTcmalloc;
    auto path = find_library(spec.names, req.library_dirs);
    if (!path) throw_unsupported("--memory-allocator " + std::string(spec.what) + ": " +
                                 not_found(spec, req.library_dirs));
    out.allocator = spec.what;
    out.allocator_library = *path;
    const std::string other = spec.what == std::string("jemalloc") ? "tcmalloc" : "jemalloc";
    const std::string theirs = user_preload_of_kind(base, other);
    if (!theirs.empty())
        out.warnings.push_back("LD_PRELOAD already holds " + theirs + "; " + *path +
                               " goes first so " + spec.what + " serves malloc");
}

void choose_omp(const EnvRequest &req, const Environment &base, RuntimeChoice &out) {
    if (req.omp == OmpRuntime::system) return;
    if (req.omp == OmpRuntime::auto_select && !user_preload_of_kind(base, "intel").empty()) {
        out.omp = "intel";
        out.omp_from_user = true;
        return;
    }
    auto path = find_library(kIntelOmp.names, req.library_dirs);
    if (!path) {
        if (req.omp == OmpRuntime::intel)
            throw_unsupported("--omp-runtime intel: " + not_found(kIntelOmp, req.library_dirs));
        out.warnings.push_back("--omp-runtime auto: no Intel-compatible OpenMP runtime (" +
                               join(kIntelOmp.names, ", ") +
                               ") was found; instances use their own OpenMP runtime (install "
                               "the Debian package libomp5-14)");
        return;
    }
    out.omp = "intel";
    out.omp_library = *path;
}

}  // namespace

RuntimeChoice choose_runtimes(const EnvRequest &req, const Environment &base) {
    RuntimeChoice out;
    choose_allocator(req, base, out);
    choose_omp(req, base, out);
    if (req.onednn_verbose) {
        auto it = base.find("ONEDNN_VERBOSE");
        if (it != base.end() && !prints_exec_lines(it->second))
            out.warnings.push_back("ONEDNN_VERBOSE=" + it->second +
                                   " is set in the environment; --onednn-verbose sets it to 1");
    }
    return out;
}

InstanceEnv plan_instance_env(const RuntimeChoice &choice, const EnvRequest &req,
                              const Environment &base, const InstancePlacement &placement,
                              int ninstances) {
    InstanceEnv env;
    auto set_or_keep = [&](const std::string &name, const std::string &value) {
        auto it = base.find(name);
        if (it != base.end()) {
            env.kept[name] = it->second;
            env.wanted[name] = value;
        } else {
            env.set[name] = value;
        }
    };
    std::vector<std::string> cpus;
    for (int cpu : placement.cpus) cpus.push_back(std::to_string(cpu));

    set_or_keep("OMP_NUM_THREADS", std::to_string(placement.cpus.size()));
    if (choice.omp == "intel") {
        set_or_keep("KMP_AFFINITY", "granularity=fine,explicit,proclist=[" + join(cpus, ",") + "]");
        set_or_keep("KMP_BLOCKTIME", kKmpBlocktime);
    } else {
        set_or_keep("OMP_PROC_BIND", "close");
        set_or_keep("OMP_PLACES", "{" + join(cpus, "},{") + "}");
        set_or_keep("OMP_SCHEDULE", "STATIC");
    }
    if (choice.allocator == "jemalloc")
        set_or_keep("MALLOC_CONF", req.benchmark ? kJemallocConfBenchmark : kJemallocConfInference);
    if (choice.allocator == "tcmalloc")
        set_or_keep("TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD", kTcmallocReportThreshold);
    if (req.onednn_verbose) {
        auto it = base.find("ONEDNN_VERBOSE");
        if (it == base.end() || !prints_exec_lines(it->second)) env.set["ONEDNN_VERBOSE"] = "1";
        if (!base.count("DNNL_VERBOSE")) env.set["DNNL_VERBOSE"] = "1";
    }
    env.set["IPEX_LAUNCH_INSTANCE"] = std::to_string(placement.index);
    env.set["IPEX_LAUNCH_NINSTANCES"] = std::to_string(ninstances);
    env.set["IPEX_LAUNCH_CPUS"] = format_id_list(placement.cpus);

    std::vector<std::string> ours;
    if (!choice.allocator_library.empty()) ours.push_back(choice.allocator_library);
    if (!choice.omp_library.empty()) ours.push_back(choice.omp_library);
    std::vector<std::string> user;
    if (auto it = base.find("LD_PRELOAD"); it != base.end()) user = split_preload(it->second);
    env.ld_preload = ours;
    for (const auto &entry : user) {
        bool dup = false;
        for (const auto &have : env.ld_preload) dup = dup || same_file(entry, have);
        if (!dup) env.ld_preload.push_back(entry);
    }
    if (!ours.empty()) env.set["LD_PRELOAD"] = join(env.ld_preload, ":");
    return env;
}

std::vector<std::string> kept_variable_warnings(const std::vector<InstanceEnv> &envs) {
    std::map<std::string, std::pair<std::string, std::string>> kept;  // name -> (user, ours)
    for (const auto &env : envs)
        for (const auto &[name, value] : env.kept)
            if (!kept.count(name)) kept[name] = {value, env.wanted.at(name)};
    std::vector<std::string> out;
    for (const auto &[name, values] : kept)
        out.push_back(name + "=" + values.first +
                      " is already set in the environment; keeping it (ipex-launch would set " +
                      values.second + "; unset it to get the planned value)");
    return out;
}

Environment apply_env(const Environment &base, const InstanceEnv &env) {
    Environment out = base;
    for (const auto &[name, value] : env.set) out[name] = value;
    return out;
}

}  // namespace ipex::launch
