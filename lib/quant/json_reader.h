// A reader of untrusted JSON objects for the qconfig and recipe loaders: every error names
// the file and the field path ("ops[3] (op 'fc:linear:0').input.scale") and is exit 3.
#pragma once

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "quant/observers.h"

namespace ipex::quant::detail {

using json = nlohmann::json;

// Reads fields of one JSON object, naming "<file>: <op>: <path>" in every error.
class Reader {
public:
    Reader(const json &object, std::string where, std::string path,
           std::string hint = "fix the qconfig or make a new one with 'ipex-tool calibrate'")
        : j_(object), where_(std::move(where)), path_(std::move(path)), hint_(std::move(hint)) {
        if (!j_.is_object()) fail("", "must be an object (got " + type_of(j_) + ")");
    }

    [[noreturn]] void fail(const std::string &field, const std::string &what) const {
        const std::string at = path_.empty() ? field : (field.empty() ? path_ : path_ + "." + field);
        ipex::throw_bad_input(where_ + ": " + (at.empty() ? "" : at + " ") + what + "; " + hint_);
    }

    bool has(const char *field) const { return j_.contains(field) && !j_.at(field).is_null(); }
    const json &get(const char *field) const {
        if (!j_.contains(field)) fail(field, "is missing");
        return j_.at(field);
    }
    std::string str(const char *field) const {
        const json &v = get(field);
        if (!v.is_string()) fail(field, "must be a string (got " + type_of(v) + ")");
        return v.get<std::string>();
    }
    double number(const char *field) const {
        const json &v = get(field);
        if (!v.is_number()) fail(field, "must be a number (got " + type_of(v) + ")");
        return v.get<double>();
    }
    int64_t integer(const char *field) const {
        const json &v = get(field);
        if (!v.is_number_integer() && !v.is_number_unsigned())
            fail(field, "must be an integer (got " + type_of(v) + ")");
        if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) fail(field, "is too large");
        return v.get<int64_t>();
    }
    Reader object(const char *field) const { return Reader(get(field), where_, join(field), hint_); }
    std::string join(const std::string &field) const { return path_.empty() ? field : path_ + "." + field; }
    const std::string &where() const { return where_; }

    static std::string type_of(const json &v) {
        if (v.is_null()) return "null";
        if (v.is_boolean()) return "a boolean";
        if (v.is_number()) return "a number";
        if (v.is_string()) return "a string";
        if (v.is_array()) return "an array";
        return "an object";
    }

private:
    const json &j_;
    std::string where_, path_, hint_;
};


// A nlohmann exception's message without its "[json.exception.x.y] " prefix.
inline std::string json_error_text(const std::exception &e) {
    const std::string text = e.what();
    const auto close = text.find("] ");
    return close == std::string::npos ? text : text.substr(close + 2);
}

// {"name": "histogram_l2", "bins": 2048, ...} with every parameter range-checked.
ObserverParams read_observer(const Reader &r);

}  // namespace ipex::quant::detail
