#include "launch/mpi_command.h"

#include <algorithm>

#include "launch/command.h"
#include "base/errors.h"
#include "base/log.h"
#include "launch/host_name.h"
#include "launch/runner.h"

namespace ipex::launch {

namespace {
constexpr const char *kOpenMpiKillTimeoutParam = "odls_base_sigkill_timeout";
}  // namespace

const std::map<std::string, MpiKind> &mpi_names() {
    static const std::map<std::string, MpiKind> names{
        {"auto", MpiKind::auto_select}, {"openmpi", MpiKind::openmpi}, {"mpich", MpiKind::mpich}};
    return names;
}

const std::vector<std::string> &mpi_launcher_names(MpiKind kind) {
    static const std::vector<std::string> openmpi{"mpirun.openmpi", "orterun"};
    static const std::vector<std::string> mpich{"mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich"};
    return kind == MpiKind::mpich ? mpich : openmpi;
}

std::string mpi_package(MpiKind kind) { return kind == MpiKind::mpich ? "mpich" : "openmpi-bin"; }

std::optional<MpiLauncher> find_mpi(MpiKind wanted, const std::string &path_var) {
    std::vector<MpiKind> order{wanted};
    if (wanted == MpiKind::auto_select) order = {MpiKind::openmpi, MpiKind::mpich};
    for (MpiKind kind : order)
        for (const auto &name : mpi_launcher_names(kind))
            if (auto path = find_executable(name, path_var)) return MpiLauncher{kind, *path};
    return std::nullopt;
}

std::string mpi_not_found(MpiKind wanted) {
    auto names = [](MpiKind kind) {
        std::string out;
        for (const auto &n : mpi_launcher_names(kind)) out += (out.empty() ? "" : ", ") + n;
        return out;
    };
    if (wanted == MpiKind::auto_select)
        return "--mpi auto: no MPI launcher was found in PATH (" + names(MpiKind::openmpi) + ", " +
               names(MpiKind::mpich) + "); install the Debian package openmpi-bin (or mpich)";
    const std::string what = wanted == MpiKind::openmpi ? "openmpi: Open MPI's" : "mpich: MPICH's";
    return "--mpi " + what + " launcher (" + names(wanted) + ") was not found in PATH; install the "
           "Debian package " + mpi_package(wanted);
}

std::vector<std::string> build_mpi_command(const MpiCommandRequest &req) {
    // The hostfile parser and --master-addr check every name (host_name.h); one that got
    // here without it would be read by mpirun or ssh as whatever it looks like.
    for (const auto &h : req.hosts)
        if (const std::string why = host_name_problem(h, false); !why.empty())
            throw_internal("host '" + shown_host(h) + "' " + why + ", and reached the MPI command line unchecked");
    const std::string ppn = std::to_string(req.nprocs_per_node);
    std::string host_list;
    for (const auto &h : req.hosts) host_list += (host_list.empty() ? "" : ",") + h + ":" + ppn;
    const std::string np = std::to_string(static_cast<long>(req.hosts.size()) * req.nprocs_per_node);
    const std::string exe = req.launcher.path.empty() ? mpi_launcher_names(req.launcher.kind).front()
                                                      : req.launcher.path;
    std::vector<std::string> argv{exe};
    if (req.launcher.kind == MpiKind::mpich) {
        argv.insert(argv.end(), {"-hosts", host_list, "-n", np, "-ppn", ppn, "-bind-to", "none"});
        std::string list;
        for (const auto &name : req.forward_env) list += (list.empty() ? "" : ",") + name;
        if (!list.empty()) argv.insert(argv.end(), {"-genvlist", list});
    } else {
        // ppr:P:node fills each host with P consecutive ranks; --bind-to none leaves the
        // placement to the rank (Open MPI would otherwise pin each rank to one core).
        argv.insert(argv.end(), {"--host", host_list, "-np", np, "--map-by", "ppr:" + ppn + ":node",
                                 "--bind-to", "none"});
        if (req.as_root) argv.push_back("--allow-run-as-root");
        // When Open MPI ends a job itself (a rank failed, or the launcher could not reach a
        // rank with a signal) it sends SIGCONT, waits odls_base_sigkill_timeout (1 s by
        // default), sends SIGTERM, waits as long again and sends SIGKILL. Ranks get the grace
        // ipex-launch gives its own instances after a timeout, unless the extra parameters set it.
        if (std::find(req.extra.begin(), req.extra.end(), kOpenMpiKillTimeoutParam) == req.extra.end())
            argv.insert(argv.end(), {"--mca", kOpenMpiKillTimeoutParam,
                                     std::to_string(kKillGraceSeconds)});
        for (const auto &name : req.forward_env) argv.insert(argv.end(), {"-x", name});
    }
    argv.insert(argv.end(), req.extra.begin(), req.extra.end());
    argv.insert(argv.end(), req.rank_command.begin(), req.rank_command.end());
    return argv;
}

std::vector<std::string> split_mpi_params(const std::string &text) {
    std::vector<std::string> words;
    std::string cur;
    bool in_word = false;
    char quote = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (quote == '\'') {
            if (c == '\'') quote = 0; else cur += c;
        } else if (quote == '"') {
            if (c == '"') {
                quote = 0;
            } else if (c == '\\' && i + 1 < text.size() &&
                       (text[i + 1] == '"' || text[i + 1] == '\\' || text[i + 1] == '$')) {
                cur += text[++i];
            } else {
                cur += c;
            }
        } else if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) words.push_back(cur);
            cur.clear();
            in_word = false;
        } else {
            in_word = true;
            if (c == '\'' || c == '"') quote = c;
            else if (c == '\\' && i + 1 < text.size()) cur += text[++i];
            else cur += c;
        }
    }
    if (quote)
        throw_usage(std::string("--extra-mpi-params: unterminated ") + (quote == '\'' ? "'" : "\"") +
                   " quote in '" + text + "'");
    if (in_word) words.push_back(cur);
    return words;
}

std::vector<std::string> forwarded_variables(const Environment &env) {
    static const char *const kNames[] = {"PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH",
                                         "MALLOC_CONF"};
    static const char *const kPrefixes[] = {"OMP_", "KMP_", "GOMP_", "ONEDNN_", "DNNL_", "GLOO_", "TP_",
                                            "TORCH_", "CCL_", "FI_", "I_MPI_", "TCMALLOC_"};
    std::vector<std::string> out;
    for (const auto &[name, value] : env) {
        bool take = false;
        for (const char *n : kNames) take = take || name == n;
        for (const char *p : kPrefixes) take = take || name.rfind(p, 0) == 0;
        if (take) out.push_back(name);
    }
    return out;
}

}  // namespace ipex::launch
