// The argv each instance runs: a .py script under `python -u`, a module with -m, or
// any program as is (--no-python runs .py files directly too).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launch/library_search.h"

namespace ipex::launch {

struct ProgramRequest {
    std::vector<std::string> command;  // PROG [ARGS...] as the user wrote them
    bool module = false;               // PROG is a Python module name (-m)
    bool no_python = false;            // never wrap in Python
    std::string python = "python3";    // interpreter for .py programs and modules
    bool must_exist = true;            // false for --dry-run: report, do not fail
};

struct ResolvedCommand {
    std::vector<std::string> argv;  // what runs, argv[0] as written
    std::string executable;         // path for execve ("" if not found in a dry run)
    std::vector<std::string> warnings;
};

// Throws Error(usage) naming the program when it cannot be found or run.
ResolvedCommand resolve_command(const ProgramRequest &req, const Environment &env);

// Path of `name` as execvp would find it: names with '/' are used as is, others are
// looked up in `path_var`. Only executable regular files count.
std::optional<std::string> find_executable(const std::string &name, const std::string &path_var);

}  // namespace ipex::launch
