// The text and class of errors raised while libtorch or a TorchScript model ran (the
// torch-free part, ipex::Error and the exit codes, is base/errors.h).
#pragma once

#include <exception>
#include <string>

#include "base/errors.h"

namespace c10 {
class Error;
}

namespace ipex {

// The first lines of a libtorch error, without its C++ backtrace, on one line.
std::string readable_error(const c10::Error &e);
// Any error a model run can raise, on one line: a libtorch error as above; an error raised
// inside the TorchScript interpreter by its cause (the last line, after the TorchScript
// traceback); anything else by its first lines.
std::string readable_error(const std::exception &e);
// readable_error as run_guarded's ErrorText (base/errors.h): the ipex-tool binaries pass it.
std::string torch_error_text(const std::exception &e);

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

}  // namespace ipex
