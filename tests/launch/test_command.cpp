#include <gtest/gtest.h>
#include <sys/stat.h>

#include "launch/command.h"
#include "base/errors.h"
#include "base/log.h"
#include "topology_fixtures.h"

namespace ipex::launch {
namespace {

using Argv = std::vector<std::string>;

// A PATH directory with an executable `prog`, a python3 stand-in and a script.
struct Sandbox {
    testing::TempDir dir;
    Environment env;
    Sandbox() {
        for (const char *name : {"prog", "python3", "mypython"}) {
            testing::write_text(dir.file(name), "#!/bin/sh\n");
            chmod(dir.file(name).c_str(), 0755);
        }
        testing::write_text(dir.file("script.py"), "print(1)\n");
        testing::write_text(dir.file("notexec"), "");
        env["PATH"] = "/nonexistent:" + dir.path();
    }
};

ProgramRequest request(Argv command) {
    ProgramRequest r;
    r.command = std::move(command);
    return r;
}

ExitCode code_of(const ProgramRequest &r, const Environment &env, std::string *message = nullptr) {
    try {
        resolve_command(r, env);
    } catch (const Error &e) {
        if (message) *message = e.what();
        return e.code();
    }
    return ExitCode::ok;
}

TEST(Command, PlainProgramRunsAsIs) {
    Sandbox s;
    const auto c = resolve_command(request({"prog", "-x", "a b"}), s.env);
    EXPECT_EQ(c.argv, (Argv{"prog", "-x", "a b"}));
    EXPECT_EQ(c.executable, s.dir.file("prog"));
}

TEST(Command, PythonScriptRunsUnbuffered) {
    Sandbox s;
    const auto c = resolve_command(request({s.dir.file("script.py"), "--n", "2"}), s.env);
    EXPECT_EQ(c.argv, (Argv{"python3", "-u", s.dir.file("script.py"), "--n", "2"}));
    EXPECT_EQ(c.executable, s.dir.file("python3"));
}

TEST(Command, PythonInterpreterCanBeChosen) {
    Sandbox s;
    ProgramRequest r = request({s.dir.file("script.py")});
    r.python = "mypython";
    const auto c = resolve_command(r, s.env);
    EXPECT_EQ(c.argv.front(), "mypython");
    EXPECT_EQ(c.executable, s.dir.file("mypython"));
}

TEST(Command, ModuleRunsWithDashM) {
    Sandbox s;
    ProgramRequest r = request({"torch.utils.collect_env", "--x"});
    r.module = true;
    const auto c = resolve_command(r, s.env);
    EXPECT_EQ(c.argv, (Argv{"python3", "-u", "-m", "torch.utils.collect_env", "--x"}));
}

TEST(Command, NoPythonRunsScriptsDirectly) {
    Sandbox s;
    ProgramRequest r = request({s.dir.file("prog"), "x.py"});
    r.no_python = true;
    EXPECT_EQ(resolve_command(r, s.env).argv, (Argv{s.dir.file("prog"), "x.py"}));
    // A .py that is not executable cannot run without Python.
    r.command = {s.dir.file("script.py")};
    EXPECT_EQ(code_of(r, s.env), ExitCode::usage);
}

TEST(Command, MissingProgramIsAUsageErrorNamingIt) {
    Sandbox s;
    std::string msg;
    EXPECT_EQ(code_of(request({"no-such-prog"}), s.env, &msg), ExitCode::usage);
    EXPECT_NE(msg.find("no-such-prog"), std::string::npos);
    EXPECT_NE(msg.find("PATH"), std::string::npos);
    EXPECT_EQ(code_of(request({s.dir.file("notexec")}), s.env, &msg), ExitCode::usage);
    EXPECT_NE(msg.find("not executable"), std::string::npos);
}

TEST(Command, MissingScriptOrInterpreter) {
    Sandbox s;
    std::string msg;
    EXPECT_EQ(code_of(request({"missing.py"}), s.env, &msg), ExitCode::usage);
    EXPECT_NE(msg.find("missing.py"), std::string::npos);
    ProgramRequest r = request({s.dir.file("script.py")});
    r.python = "python9";
    EXPECT_EQ(code_of(r, s.env, &msg), ExitCode::usage);
    EXPECT_NE(msg.find("--python"), std::string::npos);
}

TEST(Command, DryRunReportsInsteadOfFailing) {
    Sandbox s;
    ProgramRequest r = request({"no-such-prog", "a"});
    r.must_exist = false;
    const auto c = resolve_command(r, s.env);
    EXPECT_EQ(c.argv, (Argv{"no-such-prog", "a"}));
    EXPECT_TRUE(c.executable.empty());
    ASSERT_EQ(c.warnings.size(), 1u);
}

TEST(Command, ConflictsAndEmptyCommand) {
    Sandbox s;
    std::string msg;
    EXPECT_EQ(code_of(request({}), s.env, &msg), ExitCode::usage);
    EXPECT_NE(msg.find("--"), std::string::npos);
    ProgramRequest r = request({"mod"});
    r.module = true;
    r.no_python = true;
    EXPECT_EQ(code_of(r, s.env, &msg), ExitCode::usage);
    EXPECT_NE(msg.find("--no-python"), std::string::npos);
}

TEST(Command, FindExecutableFollowsPathOrder) {
    Sandbox s;
    EXPECT_EQ(find_executable("sh", "/bin"), std::optional<std::string>("/bin/sh"));
    EXPECT_EQ(find_executable("prog", s.env.at("PATH")), std::optional<std::string>(s.dir.file("prog")));
    EXPECT_FALSE(find_executable("notexec", s.dir.path()));
    EXPECT_FALSE(find_executable("", "/bin"));
}

}  // namespace
}  // namespace ipex::launch
