#include "pybridge/op_guard.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <iostream>
#include <mutex>
#include <sstream>

#include "base/errors.h"
#include "base/json_io.h"
#include "base/log.h"
#include "core/run_errors.h"

namespace ipex::pybridge {
namespace {

// What the library calls itself in its diagnostics when Python runs it.
constexpr const char *kProgram = "ipex_tool";

// Swaps std::cerr's buffer for a string while alive. One op at a time owns the capture (the
// library's drivers are not meant to run concurrently in one process anyway).
class StderrCapture {
public:
    StderrCapture() : lock_(mutex()), old_(std::cerr.rdbuf(buffer_.rdbuf())) { log::set_program(kProgram); }
    ~StderrCapture() { std::cerr.rdbuf(old_); }
    StderrCapture(const StderrCapture &) = delete;
    StderrCapture &operator=(const StderrCapture &) = delete;

    std::string text() const { return buffer_.str(); }

private:
    static std::mutex &mutex() {
        static std::mutex m;
        return m;
    }
    std::lock_guard<std::mutex> lock_;
    std::ostringstream buffer_;
    std::streambuf *old_;
};

[[noreturn]] void throw_as_c10(ExitCode code, const std::string &message) {
    // The two-string constructor: the message alone, no C++ backtrace in Python's text.
    switch (code) {
    case ExitCode::usage:
    case ExitCode::bad_input:
        throw c10::ValueError(message, "");
    case ExitCode::unsupported:
        throw c10::NotImplementedError(message, "");
    default:
        throw c10::Error(message, "");
    }
}

}  // namespace

std::vector<std::string> split_warnings(const std::string &captured, std::string &other) {
    const std::string prefix = std::string(kProgram) + ": warning: ";
    std::vector<std::string> warnings;
    std::istringstream lines(captured);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind(prefix, 0) == 0)
            warnings.push_back(line.substr(prefix.size()));
        else if (!line.empty())
            other += line + "\n";
    }
    return warnings;
}

nlohmann::json run_guarded_op(const char *op, const std::function<nlohmann::json()> &fn) {
    std::string captured;
    ExitCode code = ExitCode::internal;
    std::string message;
    try {
        nlohmann::json result;
        {
            StderrCapture capture;
            try {
                result = fn();
            } catch (...) {
                captured = capture.text();
                throw;
            }
            captured = capture.text();
        }
        std::string other;
        result["warnings"] = split_warnings(captured, other);
        if (!other.empty()) std::cerr << other;
        return result;
    } catch (const Error &e) {
        code = e.code();
        message = e.what();
    } catch (const c10::Error &e) {
        message = readable_error(e);
    } catch (const std::exception &e) {
        message = readable_error(e);
    }
    std::cerr << captured;
    throw_as_c10(code, std::string(op) + ": " + message);
}

nlohmann::json parse_options(const char *op, const std::string &options_json, const std::vector<std::string> &known) {
    const std::string where = std::string(op) + " options";
    nlohmann::json options;
    try {
        options = parse_json_object(options_json, where);
    } catch (const Error &e) {
        throw_usage(e.what());
    }
    for (const auto &[key, value] : options.items())
        if (std::find(known.begin(), known.end(), key) == known.end())
            throw_usage(where + ": unknown field '" + key + "'");
    return options;
}

}  // namespace ipex::pybridge
