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
constexpr size_t kMaxErrorLines = 4;
}  // namespace

std::string readable_error(const c10::Error &e) {
    const std::string text = e.what_without_backtrace();
    std::string out;
    size_t lines = 0, pos = 0;
    while (pos < text.size() && lines < kMaxErrorLines) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        if (line.rfind("Exception raised from", 0) == 0) break;
        while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
        if (line.empty() || line.find_first_not_of(" ~^") == std::string::npos) continue;
        if (!out.empty()) out += " | ";
        out += line;
        ++lines;
    }
    return out;
}

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
                  << readable_error(e) << "\n";
        return static_cast<int>(ExitCode::internal);
    } catch (const std::exception &e) {
        std::cerr << program << ": error: internal: " << e.what() << "\n";
        return static_cast<int>(ExitCode::internal);
    }
}

}  // namespace ipex
