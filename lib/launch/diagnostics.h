// Errors and messages for ipex-launch without libtorch. Errors are ipex::Error from
// core/errors.h (header-only part) with the exit codes of DESIGN.md; warnings go to
// stderr as "ipex-launch: warning: ...". The launcher stays free of libtorch, whose
// load time alone would exceed the per-instance overhead budget.
#pragma once

#include <string>

#include "core/errors.h"

namespace ipex::launch {

[[noreturn]] void fail_usage(const std::string &message);        // exit 2
[[noreturn]] void fail_bad_input(const std::string &message);    // exit 3
[[noreturn]] void fail_unsupported(const std::string &message);  // exit 4
[[noreturn]] void fail_check(const std::string &message);        // exit 1
[[noreturn]] void fail_internal(const std::string &message);     // exit 5

namespace diag {

enum class Level { quiet = 0, normal = 1, verbose = 2 };
void set_level(Level level);
void warn(const std::string &message);     // always
void info(const std::string &message);     // unless quiet
void verbose(const std::string &message);  // with --verbose

}  // namespace diag

// Runs fn and maps an escaping ipex::Error to "<program>: error: ..." and its exit
// code; any other exception is an internal error (5). Used once, by main.
int guarded_main(const char *program, int (*fn)(int, char **), int argc, char **argv);

}  // namespace ipex::launch
