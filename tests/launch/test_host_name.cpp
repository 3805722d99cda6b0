// The one host-name rule (host_name.h) and where it applies: hostfile lines, the MPI
// command's host list.
#include <gtest/gtest.h>

#include "base/errors.h"
#include "base/log.h"
#include "launch/host_name.h"
#include "launch/hostfile.h"
#include "launch/mpi_command.h"

namespace ipex::launch {
namespace {

TEST(HostName, Rfc1123NamesAndIpv4Pass) {
    const std::string label63(63, 'a');
    std::string longest = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');  // 253
    ASSERT_EQ(longest.size(), kMaxHostName);
    for (const std::string &good : {std::string("localhost"), std::string("node0"), std::string("Node-0.Example.COM"),
                                    std::string("a"), std::string("0node"), std::string("10.0.0.3"),
                                    std::string("255.255.255.255"), std::string("0.0.0.0"), std::string("x1.y2"),
                                    label63, longest})
        EXPECT_EQ(host_name_problem(good, false), "") << good;
}

TEST(HostName, EverythingElseIsRefusedWithTheReason) {
    const std::pair<std::string, std::string> cases[] = {
        {"", "is empty"},
        {"-oProxyCommand", "starts with '-'"},
        {"-", "starts with '-'"},
        {"node-", "ending with '-'"},
        {"a.-b", "starting or ending with '-'"},
        {"node_0", "holds '_'"},
        {"a b", "holds a blank"},
        {"a;b", "holds ';'"},
        {"user@host", "holds '@'"},
        {"a/b", "holds '/'"},
        {std::string("a\x01", 2), "holds byte 0x01"},
        {"caf\xc3\xa9", "holds byte 0xc3"},
        {".a", "empty label"},
        {"a.", "empty label"},
        {"a..b", "empty label"},
        {std::string(64, 'a'), "label longer than 63"},
        {std::string(254, 'a'), "longer than 253"},
        {"10.0.0.256", "not an IPv4 address"},
        {"010.0.0.1", "not an IPv4 address"},  // octal to inet_aton
        {"127.1", "not an IPv4 address"},      // 127.0.0.1 to inet_aton
        {"1.2.3.4.5", "not an IPv4 address"},
        {"host.123", "not an IPv4 address"},
        {"fe80::1", "IPv6 addresses are not accepted here"},
    };
    for (const auto &[host, reason] : cases) {
        const std::string why = host_name_problem(host, false);
        EXPECT_NE(why.find(reason), std::string::npos) << "'" << host << "': " << why;
    }
}

TEST(HostName, Ipv6OnlyWhereAllowedAndWithoutBrackets) {
    EXPECT_EQ(host_name_problem("fd00::2", true), "");
    EXPECT_EQ(host_name_problem("::ffff:10.0.0.1", true), "");
    EXPECT_NE(host_name_problem("[fd00::2]", true).find("without them"), std::string::npos);
    EXPECT_NE(host_name_problem("fd00:::2", true).find("not an IPv6 address"), std::string::npos);
    EXPECT_NE(host_name_problem("-x:1", true).find("not an IPv6 address"), std::string::npos);
}

// The error of parsing `text` as hosts.txt, "" when it parses.
std::string hostfile_error(const std::string &text) {
    try {
        parse_hostfile(text, "hosts.txt");
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::bad_input);
        return e.what();
    }
    return "";
}

TEST(HostName, HostfileNamesTheFileLineAndHost) {
    EXPECT_EQ(hostfile_error("node0 slots=2\n-oProxyCommand slots=1\n"),
              "--hostfile hosts.txt line 2: host '-oProxyCommand' starts with '-', which mpirun and ssh would read "
              "as an option; " + std::string(kHostNameRule));
    for (const char *text : {"a\n-oProxyCommand=nc\\ x\n", "a\n-H:2\n", "a\nnode_1 slots=1\n", "a\nb..c\n"})
        EXPECT_NE(hostfile_error(text).find("--hostfile hosts.txt line 2: host '"), std::string::npos) << text;
    // ':' gives the slots, so an IPv6 literal cannot be written; say so rather than
    // complain about slots.
    for (const char *text : {"fe80::1\n", "[fd00::2]:2\n", "[::1] slots=1\n"})
        EXPECT_NE(hostfile_error(text).find("line 1: '"), std::string::npos) << text;
    EXPECT_NE(hostfile_error("fe80::1\n").find("IPv6"), std::string::npos);
    // DNS names do not care about case: the same host twice is still a duplicate.
    EXPECT_NE(hostfile_error("Node0\nnode0\n").find("line 2: host node0 is listed again (first on line 1)"),
              std::string::npos);
}

TEST(HostName, MpiCommandRefusesAHostThatSkippedTheCheck) {
    MpiCommandRequest r;
    r.launcher = {MpiKind::openmpi, "/usr/bin/mpirun.openmpi"};
    r.hosts = {"node0", "-oProxyCommand=sh"};
    r.rank_command = {"/x/ipex-launch", "--rank-exec", "--", "prog"};
    try {
        build_mpi_command(r);
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::internal);
        EXPECT_NE(std::string(e.what()).find("'-oProxyCommand=sh'"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace ipex::launch
