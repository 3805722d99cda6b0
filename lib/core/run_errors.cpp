#include "core/run_errors.h"

#include <c10/util/Exception.h>

namespace ipex {

namespace {
constexpr size_t kMaxErrorLines = 4;

// Up to kMaxErrorLines non-blank lines of `text`, stopping at a C++ backtrace, joined by " | ".
std::string first_lines(const std::string &text) {
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

std::string strip_tags(std::string text) {
    for (const char *tag : {kCallerInputTag, kInternalTag}) {
        const std::string t(tag);
        for (size_t at = text.find(t); at != std::string::npos; at = text.find(t, at)) text.erase(at, t.size());
    }
    return text;
}

std::string raw_text(const std::exception &e) {
    if (const auto *torch_error = dynamic_cast<const c10::Error *>(&e)) return torch_error->what_without_backtrace();
    return e.what();
}

}  // namespace

std::string readable_error(const c10::Error &e) {
    return first_lines(strip_tags(e.what_without_backtrace()));
}

std::string readable_error(const std::exception &e) {
    if (const auto *torch_error = dynamic_cast<const c10::Error *>(&e)) return readable_error(*torch_error);
    std::string text = strip_tags(e.what());
    if (text.find("Traceback of TorchScript") != std::string::npos) {
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
        return first_lines(text.substr(text.rfind('\n') + 1));
    }
    return first_lines(text);
}

std::string torch_error_text(const std::exception &e) { return readable_error(e); }

RunErrorKind classify_run_error(const std::exception &e) {
    const std::string text = raw_text(e);
    // The tag nearest the cause wins: an op's error quoted inside another's keeps its own.
    const size_t input = text.rfind(kCallerInputTag), internal = text.rfind(kInternalTag);
    if (input == std::string::npos && internal == std::string::npos) return RunErrorKind::model;
    if (internal == std::string::npos) return RunErrorKind::caller_input;
    if (input == std::string::npos) return RunErrorKind::internal;
    return input > internal ? RunErrorKind::caller_input : RunErrorKind::internal;
}

void rethrow_run_error(const std::exception &e, const std::string &rejected, const std::string &hint,
                       ExitCode rejected_code) {
    const std::string cause = readable_error(e);
    if (classify_run_error(e) == RunErrorKind::internal)
        throw Error(ExitCode::internal, "internal error in an ipex op: " + cause +
                                            " (the model and inputs are not at fault; please report this)");
    throw Error(rejected_code, rejected + cause + hint);
}

}  // namespace ipex
