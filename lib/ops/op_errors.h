// How our ops raise errors (the classes are explained in base/errors.h):
// IPEX_CHECK_INPUT for a check of the caller's tensors (shape, dtype, rank): exit 3; any
// other failure inside an op is internal (exit 5), marked so by guard_op at the op boundary,
// which every registered op goes through (IPEX_GUARDED).
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>
#include <utility>

#include "base/errors.h"

#define IPEX_CHECK_INPUT(cond, ...) TORCH_CHECK(cond, ::ipex::kCallerInputTag, __VA_ARGS__)

namespace ipex::ops {

// Inside a catch block: rethrows the error in flight as it is when it already carries a class
// tag, else marked internal.
[[noreturn]] void rethrow_from_op();

template <auto Fn>
struct Guarded;

// The op function Fn, with every error it raises classified on the way out.
template <typename R, typename... Args, R (*Fn)(Args...)>
struct Guarded<Fn> {
    static R call(Args... args) {
        try {
            return Fn(std::forward<Args>(args)...);
        } catch (...) {
            rethrow_from_op();
        }
    }
};

}  // namespace ipex::ops

// The registered form of op function `fn`: m.def("schema", IPEX_GUARDED(fn)).
#define IPEX_GUARDED(fn) (&::ipex::ops::Guarded<&fn>::call)
