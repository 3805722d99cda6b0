// ipex-launch: runs pinned copies of a program. Parsing only; lib/launch does the work.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/text.h"
#include "base/log.h"
#include "launch/launch.h"
#include "launch/options.h"

namespace {

constexpr const char *kProgram = "ipex-launch";
constexpr const char *kVersion = "0.1.0";

std::string suggestion(const CLI::App &app, const std::string &arg) {
    const std::string name = arg.substr(0, arg.find('='));
    std::string best;
    size_t best_d = 4;
    for (const CLI::Option *opt : app.get_options()) {
        for (const auto &lname : opt->get_lnames()) {
            const size_t d = ipex::edit_distance(name, "--" + lname);
            if (d < best_d) best_d = d, best = "--" + lname;
        }
    }
    return best.empty() ? "" : "; did you mean " + best + "?";
}

// The option table: every flag, its group, default and help.
void add_options(CLI::App &app, ipex::launch::LaunchOptions &o) {
    using namespace ipex::launch;
    // Choice options: the value must be one of the names of a lib/launch table.
    const auto choice = [&app](const std::string &flag, auto &target, const auto &names,
                               const std::string &default_name, const std::string &help) {
        std::vector<std::string> keys;
        for (const auto &entry : names) keys.push_back(entry.first);
        std::string type;
        for (const auto &k : keys) type += (type.empty() ? "" : "|") + k;
        return app.add_option_function<std::string>(
                      flag, [&target, &names](const std::string &v) { target = names.at(v); }, help)
            ->check(CLI::IsMember(keys).description(""))
            ->type_name(type)
            ->default_str(default_name);
    };

    // Count options: set only when given, so an explicit 0 is refused (check_counts), never
    // taken for "not given".
    const auto count = [&app](const std::string &flag, std::optional<int> &target, const std::string &help) {
        return app.add_option_function<int>(flag, [&target](const int &v) { target = v; }, help)->type_name("N");
    };

    const std::string topo = "Topology (default: this machine)";
    app.add_option("--topology", o.topology_xml, "Plan for the machine in this hwloc XML file (lstopo --of xml); needs --dry-run")
        ->group(topo)->type_name("FILE");
    app.add_option("--synthetic", o.synthetic, "Plan for an hwloc synthetic machine, e.g. \"package:2 numa:1 core:28 pu:2\"; needs --dry-run")
        ->group(topo)->type_name("DESC");

    const std::string part = "Partitioning";
    count("--ninstances", o.ninstances, "Number of instances, 1 or more (default: 1, or as many as --ncores-per-instance allows)")
        ->group(part);
    count("--ncores-per-instance", o.ncores_per_instance, "Cores per instance, 1 or more; 0 = even split, leftovers unused; -1 = even split, leftovers to the first instances")
        ->group(part)->default_str("0");
    app.add_option("--instance-idx", o.instance_idx, "Run only these instances of the plan, e.g. 0,2-3")
        ->group(part)->type_name("LIST");
    choice("--strategy", o.strategy, strategy_names(), "close",
           "close: fill NUMA nodes in order; scatter: spread instances round-robin over NUMA nodes")
        ->group(part);
    app.add_flag("--bind-numa-node", o.bind_numa_node, "Never let an instance span NUMA nodes")->group(part);
    app.add_flag("--use-logical-cores", o.use_logical_cores, "Count every hardware thread (SMT sibling) as a core")->group(part);
    app.add_flag("--use-e-cores", o.use_e_cores, "Also use E-cores on hybrid CPUs (excluded by default)")->group(part);
    app.add_option("--cores-list", o.cores_list, "Use only these physical cores (ids as in --dry-run), e.g. 0-27,56-83")
        ->group(part)->type_name("LIST");
    app.add_option("--cpus-list", o.cpus_list, "Use only these OS processor ids (like taskset -c), e.g. 0-3,8")
        ->group(part)->type_name("LIST");
    app.add_option("--nodes-list", o.nodes_list, "Use only the cores of these NUMA nodes, e.g. 0,2-3")
        ->group(part)->type_name("LIST");
    app.add_flag("--latency-mode", o.latency_mode, "4 cores per instance over all physical cores")->group(part);
    app.add_flag("--throughput-mode", o.throughput_mode, "One instance per NUMA node, on all its cores")->group(part);

    const std::string run = "Binding and runtimes";
    choice("--multi-task-manager", o.task_manager, task_manager_names(), "auto",
           "auto: set CPU affinity and memory policy directly; none: no process binding; "
           "numactl/taskset: prefix the command with that tool")
        ->group(run);
    choice("--memory-allocator", o.allocator, allocator_names(), "auto",
           "auto: tcmalloc, else jemalloc, else default; or name one")
        ->group(run);
    app.add_flag("--benchmark", o.benchmark, "jemalloc tuned for benchmarks (never returns memory); auto then prefers jemalloc")->group(run);
    choice("--omp-runtime", o.omp, omp_runtime_names(), "auto",
           "auto: Intel-compatible OpenMP if found; default: the program's own (GNU); intel: preload it")
        ->group(run);

    const std::string prog = "Program";
    app.add_flag("-m,--module", o.module, "PROGRAM is a Python module: run python -u -m PROGRAM")->group(prog);
    app.add_flag("--no-python", o.no_python, "Run PROGRAM as is, even a .py file")->group(prog);
    app.add_option("--python", o.python, "Interpreter for .py programs and -m modules")->group(prog)->type_name("PATH")->default_str("python3");

    const std::string out = "Running and output";
    app.add_option("--log-dir", o.log_dir, "Write each instance's output to DIR/PREFIX_instanceI_cpusLIST.log and a summary JSON")
        ->group(out)->type_name("DIR");
    app.add_option("--log-file-prefix", o.log_file_prefix, "Prefix of the log file names")->group(out)->type_name("PREFIX")->default_str("run");
    app.add_flag("--onednn-verbose", o.onednn_verbose, "Run with ONEDNN_VERBOSE=1 and report oneDNN kernels per instance, with AMX: yes/no")->group(out);
    app.add_option("--require-isa", o.require_isa, "Exit 1 unless every instance ran its convolution/matmul time on this ISA (amx, avx512_core_bf16, ...); implies --onednn-verbose")
        ->group(out)->type_name("ISA");
    app.add_option("--require-isa-share", o.require_isa_share, "Fraction of the compute time that must run on --require-isa")
        ->group(out)->type_name("X")->default_str("0.9");
    app.add_option("--timeout", o.timeout_seconds, "Stop the instances after this many seconds (SIGTERM, SIGKILL 10 s later); 0 = none")
        ->group(out)->type_name("SECONDS")->default_str("0");
    app.add_flag("--dry-run", o.dry_run, "Print the plan and run nothing")->group(out);
    app.add_flag("--json", o.json, "Print the plan (--dry-run) or the run report as JSON on stdout")->group(out);
    app.add_flag("-q,--quiet", o.quiet, "No summary unless something failed")->group(out);
    app.add_flag("-v,--verbose", o.verbose, "Say more about what is done")->group(out);

    const std::string multi = "Multi-node (through Open MPI or MPICH)";
    count("--nnodes", o.nnodes, "Run on this many hosts, 1 or more, the first ones of --hostfile (default: all of them)")
        ->group(multi);
    count("--nprocs-per-node", o.nprocs_per_node, "Ranks on each host, 1 or more; its cores are split among them (default: one per NUMA node)")
        ->group(multi)->type_name("P");
    app.add_option("--hostfile", o.hostfile, "Hosts, one a line: HOST, HOST slots=N or HOST:N; ipex-launch runs on the first")
        ->group(multi)->type_name("FILE");
    app.add_option("--master-addr", o.master_addr, "MASTER_ADDR of the ranks, an address of this machine (default: the first host)")
        ->group(multi)->type_name("ADDR");
    app.add_option("--master-port", o.master_port, "MASTER_PORT of the ranks")->group(multi)->type_name("PORT")->default_str("29500");
    choice("--mpi", o.mpi, mpi_names(), "auto", "MPI launcher: openmpi (mpirun.openmpi), mpich (mpiexec.hydra); auto: Open MPI, else MPICH")
        ->group(multi);
    app.add_option("--extra-mpi-params", o.extra_mpi_params, "More arguments for mpirun/mpiexec, split like a shell does, e.g. \"--mca btl_tcp_if_include eth0\"")
        ->group(multi)->type_name("\"ARGS\"");
    app.add_flag("--skip-host-check", o.skip_host_check, "Do not probe the hosts (TCP port 22) before starting mpirun")->group(multi);
    // Internal: the per-rank program mpirun starts (see man ipex-launch, MULTI-NODE RUNS).
    app.add_flag("--rank-exec", o.rank_exec)->group("");
    app.add_option("--report", o.report_to)->group("");
    app.add_option("--rank-hosts", o.rank_hosts)->group("");
}

int launch_main(int argc, char **argv) {
    CLI::App app{"Runs pinned copies of a program, with the allocator and OpenMP runtime chosen and "
                 "tuned.\n  ipex-launch [OPTIONS] [--] PROGRAM [ARGS...]",
                 kProgram};
    app.footer("See man ipex-launch for the variables set, exit codes and examples.");
    app.set_version_flag("--version", std::string(kProgram) + " " + kVersion);
    app.prefix_command();
    ipex::launch::LaunchOptions opts;
    add_options(app, opts);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp &e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp &e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion &e) {
        return app.exit(e);
    } catch (const CLI::ParseError &e) {
        ipex::throw_usage(std::string(e.what()) + " (see ipex-launch --help)");
    }
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && rest.front() == "--") {
        rest.erase(rest.begin());
    } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
        ipex::throw_usage("unknown option " + rest.front() + suggestion(app, rest.front()) +
                          " (put the program after --)");
    }
    opts.command = rest;
    return ipex::launch::run_launch(opts);
}

}  // namespace

int main(int argc, char **argv) { return ipex::run_guarded(kProgram, launch_main, argc, argv); }
