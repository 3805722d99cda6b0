// Errors thrown inside lib/ and mapped to exit codes once per binary (DESIGN.md). Torch-free:
// ipex-launch uses it as ipex-tool does; the text of libtorch's errors is core/run_errors.h.
#pragma once

#include <stdexcept>
#include <string>

namespace ipex {

// Exit codes shared by every binary.
enum class ExitCode : int {
    ok = 0,
    check_failed = 1,  // the check the user asked for failed
    usage = 2,         // bad flags or arguments
    bad_input = 3,     // unreadable, corrupt or wrong kind of file
    unsupported = 4,   // model or feature not supported
    internal = 5,      // broken invariant
};

// An error the user can act on: the message names the file, op or field and a hint.
class Error : public std::runtime_error {
public:
    Error(ExitCode code, const std::string &message)
        : std::runtime_error(message), code_(code) {}
    ExitCode code() const { return code_; }

private:
    ExitCode code_;
};

[[noreturn]] void throw_usage(const std::string &message);
[[noreturn]] void throw_bad_input(const std::string &message);
[[noreturn]] void throw_unsupported(const std::string &message);
[[noreturn]] void throw_check_failed(const std::string &message);
[[noreturn]] void throw_internal(const std::string &message);

// Errors raised inside our TorchScript ops reach the caller through the interpreter as text
// only (it rethrows every exception as a runtime_error carrying the message), so an op marks
// the class of each error in its message where it raises it: kCallerInputTag when the
// caller's tensors are wrong (shape, dtype, rank: exit 3), kInternalTag for anything else
// (a broken invariant: exit 5). lib/ops/op_errors.h has the macros and the op-boundary guard.
constexpr const char *kCallerInputTag = "[ipex:input] ";
constexpr const char *kInternalTag = "[ipex:internal] ";

// How an unexpected exception reads on one line (core/run_errors.h has libtorch's).
using ErrorText = std::string (*)(const std::exception &);

// Runs fn with the standard streams guarded (base/standard_streams.h), prints any error as
// "<program>: error: ..." and returns the exit code: an ipex::Error's own, 5 for anything else
// (its text by `describe`, or what() without one). Every main() goes through this exactly once.
int run_guarded(const std::string &program, int (*fn)(int, char **), int argc, char **argv,
                ErrorText describe = nullptr);

}  // namespace ipex
