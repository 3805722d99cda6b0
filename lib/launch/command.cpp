#include "launch/command.h"

#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/log.h"

namespace ipex::launch {
namespace {

bool is_executable_file(const std::string &path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

bool ends_with(const std::string &s, const std::string &suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::optional<std::string> find_executable(const std::string &name, const std::string &path_var) {
    if (name.empty()) return std::nullopt;
    if (name.find('/') != std::string::npos)
        return is_executable_file(name) ? std::optional<std::string>(name) : std::nullopt;
    size_t pos = 0;
    while (pos <= path_var.size()) {
        size_t end = path_var.find(':', pos);
        if (end == std::string::npos) end = path_var.size();
        std::string dir = path_var.substr(pos, end - pos);
        if (dir.empty()) dir = ".";
        const std::string candidate = dir + "/" + name;
        if (is_executable_file(candidate)) return candidate;
        pos = end + 1;
    }
    return std::nullopt;
}

ResolvedCommand resolve_command(const ProgramRequest &req, const Environment &env) {
    if (req.command.empty())
        throw_usage("no program given; write: ipex-launch [OPTIONS] -- PROGRAM [ARGS...]");
    if (req.module && req.no_python)
        throw_usage("-m/--module runs a Python module and --no-python forbids Python; drop one");
    ResolvedCommand out;
    auto path_it = env.find("PATH");
    const std::string path_var = path_it == env.end() ? "/usr/local/bin:/usr/bin:/bin" : path_it->second;
    auto fail = [&](const std::string &message) {
        if (req.must_exist) throw_usage(message);
        out.warnings.push_back(message);
    };

    const std::string &prog = req.command.front();
    const bool python_script = !req.no_python && !req.module && ends_with(prog, ".py");
    std::string exe_name = prog;
    if (req.module || python_script) {
        exe_name = req.python;
        out.argv = {req.python, "-u"};
        if (req.module) out.argv.push_back("-m");
        if (python_script && access(prog.c_str(), R_OK) != 0)
            fail("Python script " + prog + " cannot be read (check the path, or pass --no-python "
                 "to run it as a program)");
    }
    out.argv.insert(out.argv.end(), req.command.begin(), req.command.end());
    if (auto exe = find_executable(exe_name, path_var)) {
        out.executable = *exe;
    } else if (exe_name == req.python && (req.module || python_script)) {
        fail("Python interpreter '" + req.python + "' was not found in PATH; pass --python "
             "/path/to/python3");
    } else {
        fail("program '" + prog + "' was not found" +
             (prog.find('/') == std::string::npos ? " in PATH" : " or is not executable") +
             " (check the name, or run it through a shell: -- /bin/sh -c '...')");
    }
    return out;
}

}  // namespace ipex::launch
