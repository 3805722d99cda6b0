// The boundary between the library and Python: every op of the `ipex_tool` namespace runs its
// driver through run_guarded_op, which turns the library's errors into the c10 errors Python
// raises as exceptions with the same text (never a crash of the interpreter), and collects the
// warnings the driver printed so Python can issue them with `warnings.warn`.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace ipex::pybridge {

// Runs fn with the library's diagnostics on stderr captured. Returns fn's JSON with the
// warnings it printed added as "warnings" (their text, without the program prefix). Errors
// leave as c10 errors: usage and bad-input errors (exit classes 2 and 3) as c10::ValueError,
// unsupported (4) as c10::NotImplementedError, anything else as c10::Error; each carries the
// library's one-line message, and the warnings printed before it go to stderr.
nlohmann::json run_guarded_op(const char *op, const std::function<nlohmann::json()> &fn);

// The warnings in `captured` (lines "PROGRAM: warning: TEXT"), as TEXTs; other lines are
// returned in `other`.
std::vector<std::string> split_warnings(const std::string &captured, std::string &other);

// The options object `options_json` names, parsed; a JSON error or a field not in `known` is
// a usage error naming the op and the field.
nlohmann::json parse_options(const char *op, const std::string &options_json, const std::vector<std::string> &known);

}  // namespace ipex::pybridge
