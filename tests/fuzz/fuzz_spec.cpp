// Fuzz target: SPEC strings and oneDNN verbose lines. Any text yields a value or a
// usage error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "core/tensor_spec.h"
#include "base/isa_check.h"
#include "base/onednn_verbose.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const ipex::ShapeSpec spec = ipex::parse_shape_spec(text);
        int64_t numel = 1;
        for (int64_t d : spec.sizes) {
            if (d <= 0) __builtin_trap();
            numel *= d;
        }
        if (numel > ipex::kMaxSpecElements) __builtin_trap();
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::usage) __builtin_trap();
    }
    const auto stats = ipex::parse_verbose_text(text);
    const double share = ipex::compute_share_satisfying(stats, "avx512_core_amx");
    if (share < 0.0 || share > 1.0 + 1e-9) __builtin_trap();
    return 0;
}
