// The one way untrusted JSON enters the tool: a bounded read, a nesting-depth limit checked before
// the parse (a deep document would overflow the stack wherever it is copied, compared or printed),
// and a typed accessor that names the file and the field in every error (exit 3). Torch-free.
#pragma once

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ipex {

// No file the tool reads nests deeper than a few levels (a tokenizer's Sequence of normalizers is
// the deepest, under 10); 128 leaves room and keeps every recursive walk's stack use small.
constexpr int kMaxJsonDepth = 128;

// The deepest nesting of objects and arrays in `text` (0 for a scalar). Linear, no allocation;
// exact for valid JSON (strings and their escapes are skipped).
int json_depth(std::string_view text);

// `text` parsed. Exit 3 naming `source` when it is not valid JSON or nests deeper than
// kMaxJsonDepth. `hint` ends the message ("a qconfig is the JSON file 'ipex-tool calibrate' writes").
nlohmann::json parse_json(std::string_view text, const std::string &source, const std::string &hint = "");
// As parse_json, and the top level must be an object.
nlohmann::json parse_json_object(std::string_view text, const std::string &source, const std::string &hint = "");
// read_bounded_file(path, limit, what) then parse_json_object.
nlohmann::json read_json_object(const std::string &path, uint64_t limit, const std::string &what,
                                const std::string &hint = "");

// A nlohmann exception's message without its "[json.exception.x.y] " prefix.
std::string json_error_text(const std::exception &e);
// "a string", "an object", ... for messages.
std::string json_type_name(const nlohmann::json &v);

// Typed reads of one JSON object's fields; every error is exit 3 and reads
// "<where>: <path>.<field> <what>; <hint>". Fields that are absent or null count as missing.
class JsonReader {
public:
    JsonReader(const nlohmann::json &object, std::string where, std::string path = "", std::string hint = "");

    [[noreturn]] void fail(const std::string &field, const std::string &what) const;

    bool has(const char *field) const;
    // The raw value (exit 3 when missing).
    const nlohmann::json &get(const char *field) const;
    std::string str(const char *field) const;
    double number(const char *field) const;  // finite
    int64_t integer(const char *field, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
    bool boolean(const char *field) const;
    const nlohmann::json &array(const char *field) const;
    JsonReader object(const char *field) const;

    // The same reads with a value for an absent or null field.
    std::string str_or(const char *field, const std::string &fallback) const;
    double number_or(const char *field, double fallback) const;
    int64_t integer_or(const char *field, int64_t fallback, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
    bool boolean_or(const char *field, bool fallback) const;

    // "path.field" for messages of checks made after the read.
    std::string join(const std::string &field) const;
    const std::string &where() const { return where_; }
    const nlohmann::json &value() const { return j_; }

private:
    const nlohmann::json &j_;
    std::string where_, path_, hint_;
};

}  // namespace ipex
