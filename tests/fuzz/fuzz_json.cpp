// Fuzz target: the one JSON entry point (base/json_io.h). Any byte string is a parsed document
// no deeper than kMaxJsonDepth, which can then be copied, compared and printed (the recursive
// walks a deep document would overflow), or exit 3; every typed read of every field is a value
// or exit 3, never a crash or another exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "base/json_io.h"

namespace {

void read_every_field(const nlohmann::json &object) {
    const ipex::JsonReader r(object, "fuzz.json");
    for (const auto &[key, value] : object.items()) {
        const char *field = key.c_str();
        const auto attempt = [](const auto &read) {
            try {
                read();
            } catch (const ipex::Error &e) {
                if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
            }
        };
        attempt([&] { r.str(field); });
        attempt([&] { r.number(field); });
        attempt([&] { r.integer(field, -1, 1 << 20); });
        attempt([&] { r.boolean_or(field, false); });
        attempt([&] { r.array(field); });
        attempt([&] { read_every_field(r.object(field).value()); });
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const nlohmann::json j = ipex::parse_json(text, "fuzz.json");
        if (ipex::json_depth(text) > ipex::kMaxJsonDepth) __builtin_trap();
        const nlohmann::json copy = j;
        if (copy != j) __builtin_trap();
        (void)copy.dump();
        if (j.is_object()) read_every_field(j);
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    return 0;
}
