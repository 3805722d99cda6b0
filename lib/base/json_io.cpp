#include "base/json_io.h"

#include <cmath>

#include "base/bounded_file.h"
#include "base/errors.h"

namespace ipex {
namespace {

std::string with_hint(const std::string &message, const std::string &hint) {
    return hint.empty() ? message : message + "; " + hint;
}

}  // namespace

int json_depth(std::string_view text) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
            continue;
        }
        switch (c) {
            case '"': in_string = true; break;
            case '{':
            case '[':
                if (++depth > deepest) deepest = depth;
                break;
            case '}':
            case ']':
                if (depth > 0) --depth;
                break;
            default: break;
        }
    }
    return deepest;
}

nlohmann::json parse_json(std::string_view text, const std::string &source, const std::string &hint) {
    const int depth = json_depth(text);
    if (depth > kMaxJsonDepth)
        throw_bad_input(with_hint("'" + source + "' nests objects or arrays " + std::to_string(depth) +
                                      " levels deep; at most " + std::to_string(kMaxJsonDepth) + " are read",
                                  hint));
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception &e) {
        throw_bad_input(with_hint("'" + source + "' is not valid JSON (" + json_error_text(e) + ")", hint));
    }
}

nlohmann::json parse_json_object(std::string_view text, const std::string &source, const std::string &hint) {
    nlohmann::json j = parse_json(text, source, hint);
    if (!j.is_object())
        throw_bad_input(with_hint("'" + source + "' is not a JSON object (it holds " + json_type_name(j) + ")", hint));
    return j;
}

nlohmann::json read_json_object(const std::string &path, uint64_t limit, const std::string &what,
                                const std::string &hint) {
    return parse_json_object(read_bounded_file(path, limit, what), path, hint);
}

std::string json_error_text(const std::exception &e) {
    const std::string text = e.what();
    const auto close = text.find("] ");
    return close == std::string::npos ? text : text.substr(close + 2);
}

std::string json_type_name(const nlohmann::json &v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    if (v.is_binary()) return "binary data";
    return "an object";
}

JsonReader::JsonReader(const nlohmann::json &object, std::string where, std::string path, std::string hint)
    : j_(object), where_(std::move(where)), path_(std::move(path)), hint_(std::move(hint)) {
    if (!j_.is_object()) fail("", "must be an object (got " + json_type_name(j_) + ")");
}

void JsonReader::fail(const std::string &field, const std::string &what) const {
    const std::string at = join(field);
    throw_bad_input(with_hint(where_ + ": " + (at.empty() ? "" : at + " ") + what, hint_));
}

std::string JsonReader::join(const std::string &field) const {
    return path_.empty() ? field : (field.empty() ? path_ : path_ + "." + field);
}

bool JsonReader::has(const char *field) const {
    const auto it = j_.find(field);
    return it != j_.end() && !it->is_null();
}

const nlohmann::json &JsonReader::get(const char *field) const {
    const auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) fail(field, "is missing");
    return *it;
}

std::string JsonReader::str(const char *field) const {
    const nlohmann::json &v = get(field);
    if (!v.is_string()) fail(field, "must be a string (got " + json_type_name(v) + ")");
    return v.get<std::string>();
}

double JsonReader::number(const char *field) const {
    const nlohmann::json &v = get(field);
    if (!v.is_number()) fail(field, "must be a number (got " + json_type_name(v) + ")");
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(field, "must be finite");
    return d;
}

int64_t JsonReader::integer(const char *field, int64_t lo, int64_t hi) const {
    const nlohmann::json &v = get(field);
    if (!v.is_number_integer()) fail(field, "must be an integer (got " + json_type_name(v) + ")");
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) fail(field, "is too large");
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi)
        fail(field, "= " + std::to_string(i) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "]");
    return i;
}

bool JsonReader::boolean(const char *field) const {
    const nlohmann::json &v = get(field);
    if (!v.is_boolean()) fail(field, "must be true or false (got " + json_type_name(v) + ")");
    return v.get<bool>();
}

const nlohmann::json &JsonReader::array(const char *field) const {
    const nlohmann::json &v = get(field);
    if (!v.is_array()) fail(field, "must be an array (got " + json_type_name(v) + ")");
    return v;
}

JsonReader JsonReader::object(const char *field) const {
    const nlohmann::json &v = get(field);
    if (!v.is_object()) fail(field, "must be an object (got " + json_type_name(v) + ")");
    return JsonReader(v, where_, join(field), hint_);
}

std::string JsonReader::str_or(const char *field, const std::string &fallback) const {
    return has(field) ? str(field) : fallback;
}
double JsonReader::number_or(const char *field, double fallback) const {
    return has(field) ? number(field) : fallback;
}
int64_t JsonReader::integer_or(const char *field, int64_t fallback, int64_t lo, int64_t hi) const {
    return has(field) ? integer(field, lo, hi) : fallback;
}
bool JsonReader::boolean_or(const char *field, bool fallback) const {
    return has(field) ? boolean(field) : fallback;
}

}  // namespace ipex
