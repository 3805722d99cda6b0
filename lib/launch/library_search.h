// Finds the shared libraries the launcher preloads (jemalloc, tcmalloc, Intel-compatible
// OpenMP) where Debian and the usual prefixes install them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ipex::launch {

using Environment = std::map<std::string, std::string>;

// This process's environment.
Environment current_environment();

// Directories searched, in order: LD_LIBRARY_PATH entries, $CONDA_PREFIX/lib,
// $VIRTUAL_ENV/lib, ~/.local/lib, /usr/local/lib64, /usr/local/lib, the Debian
// multiarch directory (/usr/lib/x86_64-linux-gnu), /usr/lib64, /usr/lib, /lib, and
// /opt/intel/oneapi/compiler/latest/lib.
std::vector<std::string> default_library_dirs(const Environment &env);

// First existing regular file (or symlink to one) named names[0] in any dir, then
// names[1], and so on: the name order is the preference order.
std::optional<std::string> find_library(const std::vector<std::string> &names,
                                        const std::vector<std::string> &dirs);

// Splits LD_PRELOAD (entries separated by ':' or spaces).
std::vector<std::string> split_preload(const std::string &value);

}  // namespace ipex::launch
