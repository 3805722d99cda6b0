#include <gtest/gtest.h>

#include "base/errors.h"
#include "base/log.h"
#include "launch/hostfile.h"
#include "topology_fixtures.h"

namespace ipex::launch {
namespace {

// The error of parsing `text`, "" when it parses.
std::string error_of(const std::string &text, ExitCode *code = nullptr) {
    try {
        parse_hostfile(text, "hosts.txt");
    } catch (const Error &e) {
        if (code) *code = e.code();
        return e.what();
    }
    return "";
}

TEST(Hostfile, OpenMpiAndMpichLinesCommentsAndBlanks) {
    const auto hosts = parse_hostfile("# cluster\n\nnode0 slots=4\n  node1:2   # second\n10.0.0.3\t max_slots=8\n",
                                      "hosts.txt");
    ASSERT_EQ(hosts.size(), 3u);
    EXPECT_EQ(hosts[0].name, "node0");
    EXPECT_EQ(hosts[0].slots, 4);
    EXPECT_EQ(hosts[0].line, 3);
    EXPECT_EQ(hosts[1].name, "node1");
    EXPECT_EQ(hosts[1].slots, 2);
    EXPECT_EQ(hosts[1].line, 4);
    EXPECT_EQ(hosts[2].name, "10.0.0.3");
    EXPECT_EQ(hosts[2].slots, 0);  // max_slots is not a slot count
}

TEST(Hostfile, CarriageReturnsAndNoFinalNewline) {
    const auto hosts = parse_hostfile("a slots=1\r\nb", "h");
    ASSERT_EQ(hosts.size(), 2u);
    EXPECT_EQ(hosts[0].slots, 1);
    EXPECT_EQ(hosts[1].name, "b");
}

TEST(Hostfile, EmptyOrCommentsOnlyIsAnError) {
    ExitCode code = ExitCode::ok;
    EXPECT_NE(error_of("", &code).find("--hostfile hosts.txt: no hosts"), std::string::npos);
    EXPECT_EQ(code, ExitCode::bad_input);
    EXPECT_NE(error_of("# nothing\n\n   \n").find("no hosts"), std::string::npos);
}

TEST(Hostfile, BadSlots) {
    for (const char *text : {"a slots=0", "a slots=-1", "a slots=x", "a slots=", "a slots=4097",
                             "a slots=99999999999999999999", "a:0", "a:", "a:2x", "a slots=1.5"}) {
        ExitCode code = ExitCode::ok;
        const std::string msg = error_of(text, &code);
        EXPECT_EQ(code, ExitCode::bad_input) << text;
        EXPECT_NE(msg.find("hosts.txt line 1:"), std::string::npos) << msg;
        EXPECT_NE(msg.find("whole number from 1 to 4096"), std::string::npos) << msg;
    }
    EXPECT_NE(error_of("a slots=2 slots=3").find("slots given twice"), std::string::npos);
    EXPECT_NE(error_of("a:2 slots=3").find("slots given twice"), std::string::npos);
}

TEST(Hostfile, DuplicateHostNamesBothLines) {
    const std::string msg = error_of("a\nb\n\na slots=2\n");
    EXPECT_NE(msg.find("line 4: host a is listed again (first on line 1)"), std::string::npos) << msg;
}

TEST(Hostfile, UnknownFieldsAndBadNames) {
    EXPECT_NE(error_of("a cpus=3").find("unknown field 'cpus=3'"), std::string::npos);
    EXPECT_NE(error_of("a b").find("unknown field 'b'"), std::string::npos);
    EXPECT_NE(error_of("ho$t").find("host 'ho$t' holds '$'"), std::string::npos);
    EXPECT_NE(error_of(":2").find("no host name before ':'"), std::string::npos);
    EXPECT_NE(error_of("a\nb\x01").find("line 2"), std::string::npos);
    EXPECT_NE(error_of(std::string("a\0b", 3)).find("NUL"), std::string::npos);
    EXPECT_NE(error_of(std::string(254, 'h')).find("longer than 253"), std::string::npos);
}

TEST(Hostfile, VeryLongLinesAreRefusedNotRead) {
    const std::string comment = "node0\n#" + std::string(kMaxHostfileLine, 'x') + "\n";
    const std::string msg = error_of(comment);
    EXPECT_NE(msg.find("line 2: longer than 4096 characters"), std::string::npos) << msg.substr(0, 200);
    EXPECT_LT(msg.size(), 300u);  // the line is not quoted back
    // Exactly the limit is fine.
    EXPECT_EQ(error_of("node0 #" + std::string(kMaxHostfileLine - 7, 'x')), "");
}

TEST(Hostfile, UnreadableFile) {
    ExitCode code = ExitCode::ok;
    try {
        load_hostfile("/nonexistent/hosts");
    } catch (const Error &e) {
        code = e.code();
        EXPECT_NE(std::string(e.what()).find("--hostfile /nonexistent/hosts: cannot read"), std::string::npos);
    }
    EXPECT_EQ(code, ExitCode::bad_input);
    testing::TempDir dir;
    testing::write_text(dir.file("h"), "x slots=2\n");
    EXPECT_EQ(load_hostfile(dir.file("h")).front().slots, 2);
    EXPECT_THROW(load_hostfile(dir.path()), Error);  // a directory
}

}  // namespace
}  // namespace ipex::launch
