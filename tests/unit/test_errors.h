// Test helper: the exit code an ipex::Error thrown by fn carries (ok when none is thrown).
#pragma once

#include <functional>

#include "base/errors.h"

namespace ipex::testing {

inline ExitCode code_of(const std::function<void()> &fn) {
    try {
        fn();
    } catch (const Error &e) {
        return e.code();
    }
    return ExitCode::ok;
}

}  // namespace ipex::testing
