#include "launch/diagnostics.h"

#include <iostream>

#include "core/standard_streams.h"

namespace ipex::launch {
namespace {
const char *g_program = "ipex-launch";
diag::Level g_level = diag::Level::normal;
}  // namespace

void fail_usage(const std::string &message) { throw Error(ExitCode::usage, message); }
void fail_bad_input(const std::string &message) { throw Error(ExitCode::bad_input, message); }
void fail_unsupported(const std::string &message) { throw Error(ExitCode::unsupported, message); }
void fail_check(const std::string &message) { throw Error(ExitCode::check_failed, message); }
void fail_internal(const std::string &message) { throw Error(ExitCode::internal, message); }

namespace diag {
void set_level(Level level) { g_level = level; }
void warn(const std::string &message) { std::cerr << g_program << ": warning: " << message << "\n"; }
void info(const std::string &message) {
    if (g_level >= Level::normal) std::cerr << g_program << ": " << message << "\n";
}
void verbose(const std::string &message) {
    if (g_level >= Level::verbose) std::cerr << g_program << ": " << message << "\n";
}
}  // namespace diag

int guarded_main(const char *program, int (*fn)(int, char **), int argc, char **argv) {
    g_program = program;
    guard_standard_streams();
    try {
        const int code = fn(argc, argv);
        check_stdout();  // a plan or report printed to a full or closed stdout is exit 2
        return code;
    } catch (const Error &e) {
        std::cerr << program << ": error: " << e.what() << "\n";
        return static_cast<int>(e.code());
    } catch (const std::exception &e) {
        std::cerr << program << ": error: internal: " << e.what() << "\n";
        return static_cast<int>(ExitCode::internal);
    }
}

}  // namespace ipex::launch
