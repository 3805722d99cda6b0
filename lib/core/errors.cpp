#include "core/errors.h"

#include <c10/util/Exception.h>

#include <iostream>

#include "core/log.h"

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

namespace {
// c10 messages carry a C++ backtrace after the first lines; keep what a user reads.
std::string first_lines(const std::string &text, size_t max_lines) {
    std::string out;
    size_t lines = 0;
    size_t pos = 0;
    while (pos < text.size() && lines < max_lines) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        if (line.rfind("Exception raised from", 0) == 0) break;
        if (!line.empty()) {
            if (!out.empty()) out += "\n  ";
            out += line;
            ++lines;
        }
        pos = end + 1;
    }
    return out;
}
}  // namespace

int run_guarded(const std::string &program, int (*fn)(int, char **), int argc,
                char **argv) {
    log::set_program(program);
    try {
        return fn(argc, argv);
    } catch (const Error &e) {
        std::cerr << program << ": error: " << e.what() << "\n";
        return static_cast<int>(e.code());
    } catch (const c10::Error &e) {
        std::cerr << program << ": error: internal: "
                  << first_lines(e.what_without_backtrace(), 6) << "\n";
        return static_cast<int>(ExitCode::internal);
    } catch (const std::exception &e) {
        std::cerr << program << ": error: internal: " << e.what() << "\n";
        return static_cast<int>(ExitCode::internal);
    }
}

}  // namespace ipex
