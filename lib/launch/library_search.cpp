#include "launch/library_search.h"

#include <sys/stat.h>

#include <cstring>

extern char **environ;

namespace ipex::launch {
namespace {

#if defined(__x86_64__)
constexpr const char *kMultiarchDir = "/usr/lib/x86_64-linux-gnu";
#elif defined(__aarch64__)
constexpr const char *kMultiarchDir = "/usr/lib/aarch64-linux-gnu";
#else
constexpr const char *kMultiarchDir = "/usr/lib";
#endif

bool is_file(const std::string &path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> split_any(const std::string &value, const char *seps) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : value) {
        if (std::strchr(seps, c)) {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

}  // namespace

Environment current_environment() {
    Environment env;
    for (char **e = environ; e && *e; ++e) {
        const char *eq = std::strchr(*e, '=');
        if (!eq) continue;
        env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
    }
    return env;
}

std::vector<std::string> default_library_dirs(const Environment &env) {
    std::vector<std::string> dirs;
    auto get = [&](const char *name) {
        auto it = env.find(name);
        return it == env.end() ? std::string() : it->second;
    };
    for (const auto &d : split_any(get("LD_LIBRARY_PATH"), ":")) dirs.push_back(d);
    if (!get("CONDA_PREFIX").empty()) dirs.push_back(get("CONDA_PREFIX") + "/lib");
    if (!get("VIRTUAL_ENV").empty()) dirs.push_back(get("VIRTUAL_ENV") + "/lib");
    if (!get("HOME").empty()) dirs.push_back(get("HOME") + "/.local/lib");
    for (const char *d : {"/usr/local/lib64", "/usr/local/lib", kMultiarchDir, "/usr/lib64",
                          "/usr/lib", "/lib", "/opt/intel/oneapi/compiler/latest/lib"})
        dirs.emplace_back(d);
    return dirs;
}

std::optional<std::string> find_library(const std::vector<std::string> &names,
                                        const std::vector<std::string> &dirs) {
    for (const auto &name : names)
        for (const auto &dir : dirs) {
            const std::string path = dir + "/" + name;
            if (is_file(path)) return path;
        }
    return std::nullopt;
}

std::vector<std::string> split_preload(const std::string &value) {
    return split_any(value, ": \t");
}

}  // namespace ipex::launch
