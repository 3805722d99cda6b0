// run_instances on real child processes: exit codes, logs, verbose statistics, timeouts.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "base/errors.h"
#include "base/log.h"
#include "launch/library_search.h"
#include "launch/runner.h"
#include "topology_fixtures.h"

namespace ipex::launch {
namespace {

RunSpec shell(int index, const std::string &script, const std::string &log = "") {
    RunSpec s;
    s.index = index;
    s.executable = "/bin/sh";
    s.argv = {"sh", "-c", script};
    for (const auto &[k, v] : current_environment()) s.envp.push_back(k + "=" + v);
    s.log_path = log;
    return s;
}

RunSettings quiet_settings() {
    RunSettings r;
    r.console = false;
    return r;
}

std::string slurp(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(Runner, ExitStatusesAndLogs) {
    testing::TempDir dir;
    const auto out = run_instances({shell(0, "echo out0; echo err0 >&2", dir.file("0.log")),
                                    shell(1, "printf partial; exit 3", dir.file("1.log"))},
                                   quiet_settings());
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(out[0].ok());
    EXPECT_EQ(out[1].exit_code, 3);
    EXPECT_FALSE(out[1].ok());
    EXPECT_EQ(out[1].status_text(), "exit 3");
    EXPECT_GT(out[0].pid, 0);
    EXPECT_GT(out[0].peak_rss_kib, 0);
    EXPECT_GT(out[0].wall_seconds, 0.0);
    const std::string log0 = slurp(dir.file("0.log"));
    EXPECT_NE(log0.find("out0\n"), std::string::npos);
    EXPECT_NE(log0.find("err0\n"), std::string::npos);
    EXPECT_EQ(slurp(dir.file("1.log")), "partial");
}

TEST(Runner, KilledBySignal) {
    const auto out = run_instances({shell(0, "kill -9 $$")}, quiet_settings());
    EXPECT_EQ(out[0].signal, 9);
    EXPECT_EQ(out[0].status_text(), "signal 9 (SIGKILL)");
}

TEST(Runner, ExecFailureIsReported) {
    RunSpec s = shell(0, "");
    s.executable = "/nonexistent/prog";
    const auto out = run_instances({s}, quiet_settings());
    EXPECT_FALSE(out[0].ok());
    EXPECT_NE(out[0].start_error.find("/nonexistent/prog"), std::string::npos);
    EXPECT_EQ(out[0].status_text(), "not started");
}

TEST(Runner, CollectsVerboseStatistics) {
    RunSettings settings = quiet_settings();
    settings.parse_verbose = true;
    const auto out = run_instances(
        {shell(0, "echo onednn_verbose,info,oneDNN v9.9.9 '(commit x)'; "
                  "for i in 1 2 3; do echo onednn_verbose,exec,cpu,matmul,brg:avx512_core_amx,undef,x,,,8x8,0.5; done; "
                  "echo done")},
        settings);
    EXPECT_EQ(out[0].verbose.exec_lines, 3);
    EXPECT_TRUE(out[0].verbose.used_amx());
    EXPECT_EQ(out[0].verbose_info.version, "v9.9.9");
}

TEST(Runner, ChildrenGetTheEnvironmentGiven) {
    testing::TempDir dir;
    RunSpec s = shell(0, "echo \"X=$IPEX_TEST_X\"", dir.file("log"));
    s.envp = {"IPEX_TEST_X=42", "PATH=/bin:/usr/bin"};
    run_instances({s}, quiet_settings());
    EXPECT_EQ(slurp(dir.file("log")), "X=42\n");
}

TEST(Runner, TimeoutStopsInstances) {
    RunSettings settings = quiet_settings();
    settings.timeout_seconds = 0.3;
    settings.kill_grace_seconds = 0.5;
    // The shell ignores SIGTERM, so the SIGKILL after the grace period ends it.
    const auto out = run_instances({shell(0, "trap '' TERM; sleep 30 & wait; sleep 30")}, settings);
    EXPECT_TRUE(out[0].timed_out);
    EXPECT_EQ(out[0].signal, 9);
    EXPECT_LT(out[0].wall_seconds, 5.0);
}

// A multi-node rank passes on the signals the launcher asks for over its channel: here a
// pipe that carries one SIGTERM once the instance is ready.
TEST(Runner, ControlDescriptorPassesSignalsOn) {
    testing::TempDir dir;
    int control[2];
    ASSERT_EQ(pipe(control), 0);
    RunSettings settings = quiet_settings();
    settings.control_fd = control[0];
    int asked = 0;
    settings.on_control = [&] {
        char byte = 0;
        const ssize_t n = read(control[0], &byte, 1);
        if (n <= 0) return -1;
        ++asked;
        return byte == 'T' ? SIGTERM : 0;
    };
    const std::string ready = dir.file("ready");
    std::thread asker([&] {
        for (int i = 0; i < 500 && access(ready.c_str(), F_OK) != 0; ++i) usleep(10000);
        (void)!write(control[1], "xT", 2);
        close(control[1]);
    });
    const auto out = run_instances({shell(0, "trap 'exit 7' TERM; touch " + ready + "; sleep 30 & wait")}, settings);
    asker.join();
    close(control[0]);
    EXPECT_EQ(out[0].exit_code, 7);
    EXPECT_EQ(asked, 2);
    EXPECT_LT(out[0].wall_seconds, 5.0);
}

// With a delivery hook (the multi-node launcher's), the timeout's SIGTERM and SIGKILL go
// through it; the process groups get them only when it says it did not reach everything.
TEST(Runner, DeliveryHookCarriesTimeoutSignals) {
    RunSettings settings = quiet_settings();
    settings.timeout_seconds = 0.2;
    settings.kill_grace_seconds = 0.3;
    std::vector<int> delivered;
    settings.deliver_signal = [&delivered](int sig) {
        delivered.push_back(sig);
        return false;  // not reached: the runner signals the group itself
    };
    const auto out = run_instances({shell(0, "trap '' TERM; sleep 30 & wait; sleep 30")}, settings);
    EXPECT_EQ(delivered, (std::vector<int>{SIGTERM, SIGKILL}));
    EXPECT_EQ(out[0].signal, SIGKILL);
    EXPECT_TRUE(out[0].timed_out);

    // A hook that claims it reached everything but did not: after one more grace period the
    // process group is killed all the same, so a run always ends.
    delivered.clear();
    settings.deliver_signal = [&delivered](int sig) {
        delivered.push_back(sig);
        return true;
    };
    const auto out2 = run_instances({shell(0, "sleep 30")}, settings);
    EXPECT_EQ(delivered, (std::vector<int>{SIGTERM, SIGKILL}));
    EXPECT_EQ(out2[0].signal, SIGKILL);
    EXPECT_LT(out2[0].wall_seconds, 5.0);
}

// A log file that cannot be written is a failed output write: the one write error (exit 2).
TEST(Runner, UnwritableLogIsWriteError) {
    try {
        run_instances({shell(0, "true", "/nonexistent/dir/x.log")}, quiet_settings());
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::usage);
        EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace ipex::launch
