// The host check's bounds (host_check.h): each distinct host once, a bounded pool of
// threads, one deadline for the whole check, no new checks after a few failures, and
// abandoned checks that outlive the call safely. The resolvers and probers here are fakes
// that sleep: nothing leaves this machine (the only real probes go to 127.0.0.1).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "base/errors.h"
#include "base/log.h"
#include "launch/host_check.h"
#include "launch/mpi_launch.h"
#include "topology_fixtures.h"

namespace ipex::launch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Counts calls and how many run at once; shared with the fake so that calls still running
// after the check returned (abandoned) write into memory that is still there.
struct Calls {
    std::atomic<int> started{0}, finished{0}, running{0}, most_at_once{0};
    void enter() {
        ++started;
        const int now = ++running;
        int seen = most_at_once.load();
        while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
        }
    }
    void leave() {
        --running;
        ++finished;
    }
};

// A resolver that takes `delay` and answers `addresses` (empty: does not resolve).
HostResolver slow_resolver(std::shared_ptr<Calls> calls, milliseconds delay, std::vector<std::string> addresses) {
    return [calls, delay, addresses](const std::string &) {
        calls->enter();
        std::this_thread::sleep_for(delay);
        calls->leave();
        return addresses;
    };
}

std::vector<HostQuery> invalid_hosts(int n, bool probe) {
    std::vector<HostQuery> q;
    for (int i = 0; i < n; ++i) q.push_back({"h" + std::to_string(i) + ".invalid", probe});
    return q;
}

int count(const std::vector<HostStatus> &st, HostState state) {
    int n = 0;
    for (const auto &s : st) n += s.state == state;
    return n;
}

TEST(HostCheck, TwoHundredSlowNamesResolveConcurrentlyOnceEach) {
    auto calls = std::make_shared<Calls>();
    HostCheckLimits limits;  // the defaults ipex-launch runs with
    const auto t0 = Clock::now();
    auto queries = invalid_hosts(200, true);
    queries.push_back(queries.front());  // listed twice, checked once
    const auto st = check_host_list(queries, limits, slow_resolver(calls, milliseconds(200), {"127.0.0.1"}));
    const double took = seconds_since(t0);
    // 200 x 0.2 s one after the other would be 40 s; 32 at a time it is 7 rounds, 1.4 s.
    EXPECT_LT(took, 4.0);
    EXPECT_EQ(calls->started.load(), 200);
    EXPECT_EQ(calls->most_at_once.load(), limits.threads);
    ASSERT_EQ(st.size(), 201u);
    EXPECT_EQ(count(st, HostState::local), 201);
    EXPECT_EQ(st.back().host, "h0.invalid");
}

TEST(HostCheck, OneDeadlineForTheWholeCheckAbandonsWhatIsLeft) {
    auto calls = std::make_shared<Calls>();
    HostCheckLimits limits;
    limits.deadline_ms = 500;
    const auto t0 = Clock::now();
    // Every lookup hangs for 3 s, as getaddrinfo does with an unreachable DNS server.
    const auto st = check_host_list(invalid_hosts(200, true), limits, slow_resolver(calls, milliseconds(3000), {}));
    const double took = seconds_since(t0);
    EXPECT_GE(took, 0.45);
    EXPECT_LT(took, 1.5);
    EXPECT_EQ(count(st, HostState::unfinished), limits.threads);  // the ones running at the deadline
    EXPECT_EQ(count(st, HostState::not_checked), 200 - limits.threads);
    EXPECT_EQ(calls->started.load(), limits.threads);
    // The abandoned lookups end on their own, after the call, without touching freed memory
    // (the sanitizer build would say), and no new one starts.
    const auto wait_until = Clock::now() + std::chrono::seconds(10);
    while (calls->finished.load() < calls->started.load() && Clock::now() < wait_until)
        std::this_thread::sleep_for(milliseconds(20));
    EXPECT_EQ(calls->finished.load(), limits.threads);
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_EQ(calls->started.load(), limits.threads);
}

TEST(HostCheck, NoNewCheckAfterTheFailureLimit) {
    auto calls = std::make_shared<Calls>();
    HostCheckLimits limits;
    limits.threads = 4;
    const auto t0 = Clock::now();
    const auto st = check_host_list(invalid_hosts(200, true), limits, slow_resolver(calls, milliseconds(100), {}));
    EXPECT_LT(seconds_since(t0), 1.0);  // one round, not 50
    const int failed = count(st, HostState::unresolved);
    EXPECT_GE(failed, limits.max_failures);
    EXPECT_LE(calls->started.load(), limits.threads + limits.max_failures);
    EXPECT_EQ(failed + count(st, HostState::not_checked), 200);
}

TEST(HostCheck, ProbesOnlyRemoteHostsAskedForWithinTheTimeout) {
    auto probed = std::make_shared<std::vector<std::string>>();
    auto mutex = std::make_shared<std::mutex>();
    HostCheckLimits limits;
    limits.threads = 1;  // the fake prober's list needs no ordering then
    for (const auto &mine : local_addresses())
        if (mine.rfind("198.51.100.", 0) == 0) GTEST_SKIP() << "this machine has " << mine << " (TEST-NET-2)";
    const HostResolver resolve = [](const std::string &host) {
        if (host == "here") return std::vector<std::string>{"127.0.0.2"};
        if (host == "gone") return std::vector<std::string>{};
        return std::vector<std::string>{"198.51.100." + std::to_string(host.size())};
    };
    const HostProber probe = [probed, mutex, limits](const std::vector<std::string> &a, int port, int timeout_ms) {
        std::lock_guard<std::mutex> lock(*mutex);
        probed->push_back(a.front());
        EXPECT_EQ(port, kProbePort);
        EXPECT_LE(timeout_ms, limits.connect_timeout_ms);
        return a.front() == "198.51.100.4" ? std::string("No route to host") : std::string();
    };
    const auto st = check_host_list({{"here", true}, {"gone", true}, {"up", true}, {"down", true}, {"skip", false}},
                                    limits, resolve, probe);
    EXPECT_EQ(st[0].state, HostState::local);
    EXPECT_EQ(st[1].state, HostState::unresolved);
    EXPECT_EQ(st[2].state, HostState::remote);
    EXPECT_EQ(st[3].state, HostState::unreachable);
    EXPECT_EQ(st[3].error, "No route to host");
    EXPECT_EQ(st[4].state, HostState::remote);
    EXPECT_EQ(*probed, (std::vector<std::string>{"198.51.100.2", "198.51.100.4"}));
}

TEST(HostCheck, ProbeOnLoopbackCountsARefusalAsAnAnswer) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    const int port = ntohs(addr.sin_port);
    ASSERT_EQ(listen(fd, 4), 0);
    EXPECT_EQ(probe_address({"127.0.0.1"}, port, 1000), "");
    close(fd);
    EXPECT_EQ(probe_address({"127.0.0.1"}, port, 1000), "");  // refused: the host is up
    EXPECT_NE(probe_address({"not-numeric"}, port, 1000), "");
    EXPECT_TRUE(is_local_address("127.0.0.1", {}));
    EXPECT_TRUE(is_local_address("::1", {}));
    EXPECT_TRUE(is_local_address("10.1.2.3", {"10.1.2.3"}));
    EXPECT_FALSE(is_local_address("10.1.2.3", {"10.1.2.4"}));
}

MultiNodePlan plan_of(int remote_hosts) {
    MultiNodePlan plan;
    plan.hostfile = "hosts.txt";
    plan.hosts.push_back({"127.0.0.1", 0, 1});
    for (int i = 0; i < remote_hosts; ++i) plan.hosts.push_back({"h" + std::to_string(i) + ".invalid", 0, i + 2});
    plan.master_addr = "127.0.0.1";
    return plan;
}

TEST(HostCheck, ReportNamesTheFirstFailuresAndCountsTheRest) {
    auto calls = std::make_shared<Calls>();
    const HostResolver resolve = [calls](const std::string &host) {
        if (host == "127.0.0.1") return std::vector<std::string>{"127.0.0.1"};
        calls->enter();
        std::this_thread::sleep_for(milliseconds(300));
        calls->leave();
        return std::vector<std::string>{};
    };
    const auto t0 = Clock::now();
    const auto report = check_hosts(plan_of(200), true, {}, resolve);
    EXPECT_LT(seconds_since(t0), 2.0);
    ASSERT_EQ(report.problems.size(), 3u);  // the failure limit: at most 3 listed
    for (const auto &p : report.problems) {
        EXPECT_EQ(p.code, ExitCode::bad_input);
        EXPECT_NE(p.message.find("--hostfile hosts.txt line "), std::string::npos) << p.message;
        EXPECT_NE(p.message.find(".invalid does not resolve"), std::string::npos) << p.message;
    }
    EXPECT_EQ(report.problems.size() + report.more_failed + report.not_checked, 200u);
    const std::string msg = report.error_message();
    EXPECT_NE(msg.find("more not checked (the host check stops after 3 failed hosts or 10 s)"), std::string::npos)
        << msg;
}

TEST(HostCheck, HostsLeftUncheckedAtTheDeadlineStopTheRunToo) {
    // Every host resolves, to this machine, but there is no time for all of them: the run
    // does not start with hosts nobody looked at, whether checks were still running at the
    // deadline (they fail) or it fell between two (the unchecked hosts are the problem).
    HostCheckLimits limits;
    limits.threads = 2;
    limits.deadline_ms = 450;
    const HostResolver resolve = [](const std::string &host) {
        if (host != "127.0.0.1") std::this_thread::sleep_for(milliseconds(100));
        return std::vector<std::string>{"127.0.0.1"};
    };
    const auto t0 = Clock::now();
    const auto report = check_hosts(plan_of(40), true, limits, resolve);
    EXPECT_LT(seconds_since(t0), 1.0);
    ASSERT_FALSE(report.problems.empty());
    for (const auto &p : report.problems) EXPECT_EQ(p.code, ExitCode::bad_input) << p.message;
    const std::string msg = report.error_message();
    const bool counted = msg.find("more not checked") != std::string::npos;
    const bool named = msg.find("the host check reached only ") != std::string::npos &&
                       msg.find("of the 40 other hosts in 0.45 s (first not checked: line ") != std::string::npos;
    EXPECT_TRUE(counted || named) << msg;
    if (counted) {
        EXPECT_NE(msg.find("gave no answer within the 0.45 s host check"), std::string::npos) << msg;
    }
}

TEST(HostCheck, MasterThatHangsIsAUsageErrorWithinTheDeadline) {
    HostCheckLimits limits;
    limits.deadline_ms = 300;
    auto plan = plan_of(0);
    plan.master_addr = "master.invalid";
    const HostResolver resolve = [](const std::string &host) {
        if (host != "master.invalid") return std::vector<std::string>{"127.0.0.1"};
        std::this_thread::sleep_for(milliseconds(2000));
        return std::vector<std::string>{};
    };
    const auto t0 = Clock::now();
    const auto report = check_hosts(plan, true, limits, resolve);
    EXPECT_LT(seconds_since(t0), 1.5);
    ASSERT_EQ(report.problems.size(), 1u);
    EXPECT_EQ(report.problems[0].code, ExitCode::usage);
    EXPECT_NE(report.problems[0].message.find("--master-addr master.invalid is not an address of this machine (it "
                                              "did not resolve within the 0.3 s host check)"),
              std::string::npos)
        << report.problems[0].message;
}

}  // namespace
}  // namespace ipex::launch
