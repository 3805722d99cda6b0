// The qconfig and recipe loaders' reads of untrusted JSON (base/json_io.h): every error names
// the file and the field path ("ops[3] (op 'fc:linear:0').input.scale") and is exit 3.
#pragma once

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "base/json_io.h"
#include "quant/observers.h"

namespace ipex::quant::detail {

using json = nlohmann::json;

// The typed accessor with the qconfig's hint; every error names "<file>: <op>: <path>".
class Reader : public JsonReader {
public:
    Reader(const json &object, std::string where, std::string path,
           std::string hint = "fix the qconfig or make a new one with 'ipex-tool calibrate'")
        : JsonReader(object, std::move(where), std::move(path), std::move(hint)) {}
    Reader(const JsonReader &r) : JsonReader(r) {}  // NOLINT: an object() read keeps its hint
    Reader object(const char *field) const { return Reader(JsonReader::object(field)); }
    static std::string type_of(const json &v) { return json_type_name(v); }
};

// {"name": "histogram_l2", "bins": 2048, ...} with every parameter range-checked.
ObserverParams read_observer(const Reader &r);

}  // namespace ipex::quant::detail
