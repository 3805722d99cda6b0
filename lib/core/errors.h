// Errors thrown inside lib/ and mapped to exit codes once per binary (DESIGN.md).
#pragma once

#include <stdexcept>
#include <string>

namespace c10 {
class Error;
}

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

// The first lines of a libtorch error, without its C++ backtrace, on one line.
std::string readable_error(const c10::Error &e);
// Any error a model run can raise, on one line: a libtorch error as above; an error raised
// inside the TorchScript interpreter by its cause (the last line, after the TorchScript
// traceback); anything else by its first lines.
std::string readable_error(const std::exception &e);

// Errors raised inside our TorchScript ops reach the caller through the interpreter as text
// only (it rethrows every exception as a runtime_error carrying the message), so an op marks
// the class of each error in its message where it raises it: kCallerInputTag when the
// caller's tensors are wrong (shape, dtype, rank: exit 3), kInternalTag for anything else
// (a broken invariant: exit 5). lib/ops/op_errors.h has the macros and the op-boundary guard.
constexpr const char *kCallerInputTag = "[ipex:input] ";
constexpr const char *kInternalTag = "[ipex:internal] ";

// Where an error raised while a model ran came from.
enum class RunErrorKind {
    caller_input,  // one of our ops rejected the caller's tensors
    internal,      // one of our ops failed for another reason
    model,         // aten or the model's own code (its checks of its inputs)
};
RunErrorKind classify_run_error(const std::exception &e);

// Rethrows an error raised while a model ran with the exit code its kind has: our ops'
// internal failures exit 5 naming the op; anything else is the model rejecting its inputs,
// `rejected` + the cause + `hint`, with `rejected_code` (3 unless the caller says otherwise).
[[noreturn]] void rethrow_run_error(const std::exception &e, const std::string &rejected, const std::string &hint,
                                    ExitCode rejected_code = ExitCode::bad_input);

// Runs fn, prints any error as "<program>: error: ..." and returns the exit code.
// Every main() goes through this exactly once.
int run_guarded(const std::string &program, int (*fn)(int, char **), int argc,
                char **argv);

}  // namespace ipex
