#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include "base/errors.h"
#include "base/log.h"
#include "launch/mpi_command.h"
#include "launch/mpi_plan.h"
#include "launch/rank_report.h"
#include "topology_fixtures.h"

namespace ipex::launch {
namespace {

using Argv = std::vector<std::string>;

MpiCommandRequest request(MpiKind kind) {
    MpiCommandRequest r;
    r.launcher = {kind, kind == MpiKind::mpich ? "/usr/bin/mpiexec.hydra" : "/usr/bin/mpirun.openmpi"};
    r.hosts = {"node0", "node1"};
    r.nprocs_per_node = 2;
    r.forward_env = {"GLOO_SOCKET_IFNAME", "PATH"};
    r.extra = {"--mca", "btl", "tcp,self"};
    r.rank_command = {"/usr/bin/ipex-launch", "--rank-exec", "--", "prog"};
    return r;
}

TEST(MpiCommand, OpenMpi) {
    auto r = request(MpiKind::openmpi);
    EXPECT_EQ(build_mpi_command(r),
              (Argv{"/usr/bin/mpirun.openmpi", "--host", "node0:2,node1:2", "-np", "4", "--map-by", "ppr:2:node",
                    "--bind-to", "none", "--mca", "odls_base_sigkill_timeout", "10", "-x", "GLOO_SOCKET_IFNAME", "-x",
                    "PATH", "--mca", "btl", "tcp,self", "/usr/bin/ipex-launch", "--rank-exec", "--", "prog"}));
    r.as_root = true;
    r.forward_env.clear();
    r.extra.clear();
    EXPECT_EQ(build_mpi_command(r),
              (Argv{"/usr/bin/mpirun.openmpi", "--host", "node0:2,node1:2", "-np", "4", "--map-by", "ppr:2:node",
                    "--bind-to", "none", "--allow-run-as-root", "--mca", "odls_base_sigkill_timeout", "10",
                    "/usr/bin/ipex-launch", "--rank-exec", "--", "prog"}));
    // The user's own kill timeout is the one mpirun gets.
    r.extra = {"--mca", "odls_base_sigkill_timeout", "30"};
    EXPECT_EQ(build_mpi_command(r),
              (Argv{"/usr/bin/mpirun.openmpi", "--host", "node0:2,node1:2", "-np", "4", "--map-by", "ppr:2:node",
                    "--bind-to", "none", "--allow-run-as-root", "--mca", "odls_base_sigkill_timeout", "30",
                    "/usr/bin/ipex-launch", "--rank-exec", "--", "prog"}));
}

TEST(MpiCommand, Mpich) {
    auto r = request(MpiKind::mpich);
    r.as_root = true;  // MPICH has no root check
    EXPECT_EQ(build_mpi_command(r),
              (Argv{"/usr/bin/mpiexec.hydra", "-hosts", "node0:2,node1:2", "-n", "4", "-ppn", "2", "-bind-to", "none",
                    "-genvlist", "GLOO_SOCKET_IFNAME,PATH", "--mca", "btl", "tcp,self", "/usr/bin/ipex-launch",
                    "--rank-exec", "--", "prog"}));
}

TEST(MpiCommand, NotFoundNamesTheLauncherAndPackage) {
    testing::TempDir dir;
    EXPECT_FALSE(find_mpi(MpiKind::auto_select, dir.path()));
    EXPECT_NE(mpi_not_found(MpiKind::openmpi).find("mpirun.openmpi, orterun"), std::string::npos);
    EXPECT_NE(mpi_not_found(MpiKind::openmpi).find("Debian package openmpi-bin"), std::string::npos);
    EXPECT_NE(mpi_not_found(MpiKind::mpich).find("Debian package mpich"), std::string::npos);
    EXPECT_NE(mpi_not_found(MpiKind::auto_select).find("openmpi-bin (or mpich)"), std::string::npos);
    // A launcher found by its Debian name decides the kind; auto prefers Open MPI.
    testing::write_text(dir.file("mpiexec.hydra"), "#!/bin/sh\n");
    chmod(dir.file("mpiexec.hydra").c_str(), 0755);
    auto found = find_mpi(MpiKind::auto_select, dir.path());
    ASSERT_TRUE(found);
    EXPECT_EQ(found->kind, MpiKind::mpich);
    EXPECT_FALSE(find_mpi(MpiKind::openmpi, dir.path()));
    testing::write_text(dir.file("mpirun.openmpi"), "#!/bin/sh\n");
    chmod(dir.file("mpirun.openmpi").c_str(), 0755);
    EXPECT_EQ(find_mpi(MpiKind::auto_select, dir.path())->kind, MpiKind::openmpi);
    EXPECT_EQ(find_mpi(MpiKind::mpich, dir.path())->path, dir.file("mpiexec.hydra"));
}

TEST(MpiCommand, ExtraParamsSplitLikeAShell) {
    EXPECT_EQ(split_mpi_params(""), Argv{});
    EXPECT_EQ(split_mpi_params("  --mca  btl_tcp_if_include eth0 "), (Argv{"--mca", "btl_tcp_if_include", "eth0"}));
    EXPECT_EQ(split_mpi_params("-x 'A=b c' \"d\\\"e\" f\\ g ''"), (Argv{"-x", "A=b c", "d\"e", "f g", ""}));
    try {
        split_mpi_params("--mca 'oops");
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::usage);
        EXPECT_NE(std::string(e.what()).find("--extra-mpi-params: unterminated '"), std::string::npos);
    }
}

TEST(MpiCommand, ForwardedVariables) {
    const Environment env{{"PATH", "/bin"}, {"GLOO_SOCKET_IFNAME", "eth0"}, {"OMP_NUM_THREADS", "4"},
                          {"HOME", "/root"}, {"SSH_AUTH_SOCK", "x"}, {"KMP_AFFINITY", "x"}, {"LD_PRELOAD", "a.so"},
                          {"MY_OMP_", "no"}};
    EXPECT_EQ(forwarded_variables(env),
              (Argv{"GLOO_SOCKET_IFNAME", "KMP_AFFINITY", "LD_PRELOAD", "OMP_NUM_THREADS", "PATH"}));
}

TEST(RankIdentity, OpenMpiAndMpichVariables) {
    EXPECT_FALSE(rank_identity({{"PATH", "/bin"}}));
    auto id = rank_identity({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    ASSERT_TRUE(id);
    EXPECT_EQ(id->rank, 3);
    EXPECT_EQ(id->world_size, 4);
    EXPECT_EQ(id->local_rank, 1);
    EXPECT_EQ(id->local_world_size, 2);
    id = rank_identity({{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "4"}});
    ASSERT_TRUE(id);
    EXPECT_EQ(id->rank, 5);
    EXPECT_EQ(id->local_world_size, 4);
    EXPECT_THROW(rank_identity({{"PMI_RANK", "x"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"},
                                {"MPI_LOCALNRANKS", "4"}}),
                 Error);
    EXPECT_THROW(rank_identity({{"PMI_RANK", "8"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"},
                                {"MPI_LOCALNRANKS", "4"}}),
                 Error);
}

TEST(RankEnv, TorchDistributedVariablesReplaceTheEnvironments) {
    InstanceEnv env;
    env.kept["RANK"] = "7";
    env.wanted["RANK"] = "x";
    env.set["OMP_NUM_THREADS"] = "14";
    add_rank_variables(env, {5, 8, 1, 4}, "10.0.0.1", 29600, 2);
    EXPECT_EQ(env.set.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(env.set.at("MASTER_PORT"), "29600");
    EXPECT_EQ(env.set.at("RANK"), "5");
    EXPECT_EQ(env.set.at("WORLD_SIZE"), "8");
    EXPECT_EQ(env.set.at("LOCAL_RANK"), "1");
    EXPECT_EQ(env.set.at("LOCAL_WORLD_SIZE"), "4");
    EXPECT_EQ(env.set.at("IPEX_LAUNCH_NNODES"), "2");
    EXPECT_EQ(env.set.at("OMP_NUM_THREADS"), "14");
    EXPECT_FALSE(env.kept.count("RANK"));
}

LaunchOptions multi_node_options() {
    LaunchOptions o;
    o.synthetic = testing::kTwoSocketsSmt;
    o.dry_run = true;
    o.nnodes = 2;
    o.nprocs_per_node = 2;
    o.hostfile = "hosts.txt";
    o.allocator = Allocator::system;
    o.omp = OmpRuntime::system;
    o.command = {"/bin/echo", "hi"};
    return o;
}

TEST(MultiNodePlan, TwoSocketsTwoHostsTwoRanks) {
    const auto o = multi_node_options();
    const std::vector<HostEntry> hosts{{"node0", 2, 1}, {"node1", 0, 2}, {"node2", 0, 3}};
    const auto plan = make_multi_node_plan(o, load_topology(o), {{"PATH", "/nonexistent"}}, hosts,
                                           "/opt/bin/ipex-launch", "4242", "abc");
    EXPECT_EQ(plan.nnodes, 2);
    EXPECT_EQ(plan.world_size, 4);
    EXPECT_EQ(plan.master_addr, "node0");
    ASSERT_EQ(plan.ranks.size(), 4u);
    for (const auto &r : plan.ranks) {
        EXPECT_EQ(r.host, r.rank < 2 ? "node0" : "node1");
        EXPECT_EQ(r.local_rank, r.rank % 2);
        // One socket of 28 cores per rank: physical core c has CPUs c and c + 56.
        const auto &p = r.instance.placement;
        EXPECT_EQ(p.packages, std::vector<int>{r.local_rank});
        ASSERT_EQ(p.cpus.size(), 28u);
        EXPECT_EQ(p.cpus.front(), 28 * r.local_rank);
        EXPECT_EQ(r.instance.env.set.at("OMP_NUM_THREADS"), "28");
        EXPECT_EQ(r.instance.env.set.at("RANK"), std::to_string(r.rank));
        EXPECT_EQ(r.instance.env.set.at("MASTER_ADDR"), "node0");
        EXPECT_EQ(r.instance.command, (Argv{"/bin/echo", "hi"}));
    }
    const Argv &cmd = plan.mpi_command;
    ASSERT_GT(cmd.size(), 10u);
    EXPECT_EQ(Argv(cmd.begin() + 1, cmd.begin() + 9),
              (Argv{"--host", "node0:2,node1:2", "-np", "4", "--map-by", "ppr:2:node", "--bind-to", "none"}));
    const auto self = std::find(cmd.begin(), cmd.end(), "/opt/bin/ipex-launch");
    ASSERT_NE(self, cmd.end());
    EXPECT_EQ(Argv(self, cmd.end()),
              (Argv{"/opt/bin/ipex-launch", "--rank-exec", "--nnodes", "2", "--nprocs-per-node", "2", "--master-addr",
                    "node0", "--master-port", "29500", "--rank-hosts", "node0,node1", "--report", "node0:4242:abc",
                    "--memory-allocator", "default", "--omp-runtime", "default", "--", "/bin/echo", "hi"}));
}

TEST(MultiNodePlan, DefaultsAndLimits) {
    auto o = multi_node_options();
    o.synthetic = testing::kFourNodes;
    o.nprocs_per_node.reset();  // one rank per NUMA node
    o.nnodes.reset();           // every host
    o.master_addr = "10.1.1.1";
    o.onednn_verbose = true;
    const std::vector<HostEntry> hosts{{"a", 0, 1}, {"b", 0, 2}};
    const auto plan = make_multi_node_plan(o, load_topology(o), {}, hosts, "/x/ipex-launch", "1", "t");
    EXPECT_EQ(plan.nnodes, 2);
    EXPECT_EQ(plan.nprocs_per_node, 4);
    EXPECT_EQ(plan.world_size, 8);
    EXPECT_EQ(plan.ranks[5].instance.placement.numa_nodes, std::vector<int>{1});
    EXPECT_EQ(plan.ranks[5].instance.env.set.at("MASTER_ADDR"), "10.1.1.1");
    EXPECT_NE(std::find(plan.mpi_command.begin(), plan.mpi_command.end(), "--onednn-verbose"), plan.mpi_command.end());

    o.nnodes = 3;
    try {
        make_multi_node_plan(o, load_topology(o), {}, hosts, "/x", "1", "t");
        FAIL();
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::usage);
        EXPECT_NE(std::string(e.what()).find("--nnodes 3: --hostfile hosts.txt lists only 2"), std::string::npos);
    }
    o.nnodes = 2;
    o.nprocs_per_node = 4;
    const std::vector<HostEntry> small{{"a", 4, 1}, {"b", 2, 2}};
    try {
        make_multi_node_plan(o, load_topology(o), {}, small, "/x", "1", "t");
        FAIL();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("host b has slots=2 in --hostfile hosts.txt line 2"), std::string::npos);
    }
    o.nprocs_per_node = 33;  // more ranks than cores
    EXPECT_THROW(make_multi_node_plan(o, load_topology(o), {}, hosts, "/x", "1", "t"), Error);
}

TEST(MultiNodeOptions, Conflicts) {
    auto expect_usage = [](const LaunchOptions &o, const std::string &mention) {
        try {
            validate_multi_node(o);
            ADD_FAILURE() << "no error for " << mention;
        } catch (const Error &e) {
            EXPECT_EQ(e.code(), ExitCode::usage);
            EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
        }
    };
    LaunchOptions o;
    o.master_addr = "x";
    expect_usage(o, "--master-addr is for multi-node runs");
    o = multi_node_options();
    o.ninstances = 2;
    expect_usage(o, "drop --ninstances");
    o = multi_node_options();
    o.hostfile.clear();
    expect_usage(o, "--nnodes 2 needs --hostfile");
    o = multi_node_options();
    o.master_port = 70000;
    expect_usage(o, "--master-port 70000");
    o = multi_node_options();
    o.throughput_mode = true;
    expect_usage(o, "drop --throughput-mode");
}

TEST(RankReport, FramesRoundTripAndBadFramesAreRefused) {
    std::string buf = encode_frame(FrameKind::hello, "{}") + encode_frame(FrameKind::out, std::string("a\0b", 3));
    buf += encode_frame(FrameKind::status, "x").substr(0, 3);  // incomplete
    auto f = take_frame(buf);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->kind, FrameKind::hello);
    EXPECT_EQ(f->payload, "{}");
    f = take_frame(buf);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->payload, std::string("a\0b", 3));
    EXPECT_FALSE(take_frame(buf));
    EXPECT_EQ(buf.size(), 3u);
    std::string bad("Z\0\0\0\0", 5);
    EXPECT_THROW(take_frame(bad), Error);
    std::string huge = encode_frame(FrameKind::out, "").substr(0, 1) + std::string("\x7f\0\0\0", 4);
    EXPECT_THROW(take_frame(huge), Error);
}

TEST(RankReport, SignalFramesCarryOnlyTheSignalsARankPassesOn) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGKILL}) {
        std::string buf = signal_frame(sig);
        const auto f = take_frame(buf);
        ASSERT_TRUE(f);
        EXPECT_EQ(f->kind, FrameKind::signal);
        EXPECT_EQ(requested_signal(*f), sig);
    }
    EXPECT_EQ(requested_signal({FrameKind::signal, "11"}), 0);  // SIGSEGV: not passed on
    EXPECT_EQ(requested_signal({FrameKind::signal, "15x"}), 0);
    EXPECT_EQ(requested_signal({FrameKind::out, "15"}), 0);
}

TEST(RankReport, OutcomeAndPlacementSurviveJson) {
    InstanceOutcome o;
    o.index = 3;
    o.pid = 1234;
    o.exit_code = 0;
    o.signal = 15;
    o.timed_out = true;
    o.wall_seconds = 1.5;
    o.peak_rss_kib = 2048;
    const auto back = outcome_from_json(nlohmann::json::parse(outcome_to_json(o).dump()));
    EXPECT_EQ(back.pid, 1234);
    EXPECT_EQ(back.signal, 15);
    EXPECT_TRUE(back.timed_out);
    EXPECT_EQ(back.status_text(), o.status_text());
    EXPECT_EQ(outcome_from_json(nlohmann::json{{"pid", "nonsense"}}).pid, -1);
    InstancePlacement p;
    p.cpus = {0, 56};
    p.numa_nodes = {1};
    EXPECT_EQ(placement_from_json(placement_to_json(p)).cpus, p.cpus);
    EXPECT_EQ(placement_from_json(nlohmann::json(3)).cpus.size(), 0u);
}

TEST(RankLog, FileNames) {
    EXPECT_EQ(rank_log_file_name("run", 3, "node1.example"), "run_rank3_node1.example.log");
    EXPECT_EQ(rank_log_file_name("job", 0, "fe80::1/x"), "job_rank0_fe80__1_x.log");
}

}  // namespace
}  // namespace ipex::launch
