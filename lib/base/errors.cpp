#include "base/errors.h"

#include <iostream>

#include "base/log.h"
#include "base/standard_streams.h"

namespace ipex {

void throw_usage(const std::string &message) {
    throw Error(ExitCode::usage, message);
}
void throw_bad_input(const std::string &message) {
    throw Error(ExitCode::bad_input, message);
}
void throw_unsupported(const std::string &message) {
    throw Error(ExitCode::unsupported, message);
}
void throw_check_failed(const std::string &message) {
    throw Error(ExitCode::check_failed, message);
}
void throw_internal(const std::string &message) {
    throw Error(ExitCode::internal, message);
}

int run_guarded(const std::string &program, int (*fn)(int, char **), int argc, char **argv,
                ErrorText describe) {
    log::set_program(program);
    guard_standard_streams();
    try {
        const int code = fn(argc, argv);
        check_stdout();  // a report printed to a full or closed stdout is exit 2
        return code;
    } catch (const Error &e) {
        std::cerr << program << ": error: " << e.what() << "\n";
        return static_cast<int>(e.code());
    } catch (const std::exception &e) {
        std::cerr << program << ": error: internal: " << (describe ? describe(e) : std::string(e.what())) << "\n";
        return static_cast<int>(ExitCode::internal);
    }
}

}  // namespace ipex
