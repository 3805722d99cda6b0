// Fuzz target: the .npy reader must turn any byte string into a tensor or a bad-input
// error, never a crash or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        at::Tensor t = ipex::parse_npy(std::string(reinterpret_cast<const char *>(data), size), "fuzz.npy");
        if (static_cast<size_t>(t.numel()) * t.element_size() > size) __builtin_trap();
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    return 0;
}
