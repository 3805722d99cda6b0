// Fuzz target: the qconfig and recipe loaders turn any byte string into a validated qconfig or
// recipe, or a bad-input error (exit 3), never a crash; what they accept survives a write/read
// round trip.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "quant/qconfig.h"
#include "quant/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const ipex::quant::QConfig config = ipex::quant::parse_qconfig(text, "fuzz.json");
        for (const auto &op : config.ops) {
            if (!(op.input.scale > 0 && std::isfinite(op.input.scale))) __builtin_trap();
            if (!(op.output.scale > 0 && std::isfinite(op.output.scale))) __builtin_trap();
            if (op.weight.scales.empty()) __builtin_trap();
        }
        const auto again = ipex::quant::parse_qconfig(ipex::quant::qconfig_to_json(config).dump(), "again.json");
        if (again.ops.size() != config.ops.size()) __builtin_trap();
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    try {
        const ipex::quant::Recipe recipe = ipex::quant::parse_recipe(text, "fuzz.recipe.json");
        const auto again = ipex::quant::parse_recipe(recipe.source.dump(), "again.recipe.json");
        if (again.source != recipe.source) __builtin_trap();
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    return 0;
}
