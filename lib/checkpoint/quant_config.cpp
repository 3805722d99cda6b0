#include "checkpoint/quant_config.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include "base/bounded_file.h"
#include "base/errors.h"
#include "base/json_io.h"

namespace ipex::woq {
namespace {

constexpr size_t kMaxConfigBytes = size_t(4) << 20;

constexpr const char *kHint = "fix the file, or pass the setting on the command line";

[[noreturn]] void fail(const std::string &source, const std::string &what) {
    throw_bad_input("'" + source + "': " + what + " (" + kHint + ")");
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

const nlohmann::json *field(const nlohmann::json &j, std::initializer_list<const char *> names,
                            std::string *used) {
    for (const char *n : names) {
        const auto it = j.find(n);
        if (it != j.end() && !it->is_null()) {
            *used = n;
            return &*it;
        }
    }
    return nullptr;
}

std::optional<int> int_field(const nlohmann::json &j, std::initializer_list<const char *> names,
                             const std::string &source) {
    std::string used;
    const nlohmann::json *v = field(j, names, &used);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) fail(source, "field '" + used + "' must be an integer");
    const int64_t x = v->get<int64_t>();
    if (x < -1 || x > (1 << 20)) fail(source, "field '" + used + "' is out of range (" + std::to_string(x) + ")");
    return static_cast<int>(x);
}

std::optional<bool> bool_field(const nlohmann::json &j, std::initializer_list<const char *> names,
                               const std::string &source) {
    std::string used;
    const nlohmann::json *v = field(j, names, &used);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(source, "field '" + used + "' must be true or false");
    return v->get<bool>();
}

std::string string_field(const nlohmann::json &j, std::initializer_list<const char *> names,
                         const std::string &source) {
    std::string used;
    const nlohmann::json *v = field(j, names, &used);
    if (!v) return "";
    if (!v->is_string()) fail(source, "field '" + used + "' must be a string");
    return lower(v->get<std::string>());
}

}  // namespace

QuantConfig parse_quant_config(const std::string &text, const std::string &source) {
    nlohmann::json j = parse_json_object(text, source, kHint);
    QuantConfig c;
    c.source = source;
    if (j.contains("quantization_config")) {
        if (!j["quantization_config"].is_object()) fail(source, "'quantization_config' is not an object");
        j = j["quantization_config"];
    } else if (j.contains("architectures") || j.contains("model_type")) {
        return c;  // a plain model config.json
    }
    c.method = string_field(j, {"quant_method"}, source);
    if (c.method.empty() && (j.contains("w_bit") || j.contains("q_group_size"))) c.method = "awq";
    if (!c.method.empty() && c.method != "gptq" && c.method != "awq")
        throw_unsupported("'" + source + "': quant_method '" + c.method +
                          "' is not supported; only gptq and awq checkpoints can be imported");
    c.bits = int_field(j, {"bits", "w_bit"}, source).value_or(0);
    c.group_size = int_field(j, {"group_size", "q_group_size"}, source).value_or(0);
    c.desc_act = bool_field(j, {"desc_act"}, source);
    c.sym = bool_field(j, {"sym"}, source);
    c.zero_point = bool_field(j, {"zero_point"}, source);
    c.checkpoint_format = string_field(j, {"checkpoint_format", "format"}, source);
    if (!c.checkpoint_format.empty() && c.checkpoint_format != "gptq" && c.checkpoint_format != "gptq_v2")
        throw_unsupported("'" + source + "': checkpoint_format '" + c.checkpoint_format +
                          "' is not supported (gptq or gptq_v2); convert it with the tool that wrote it");
    c.awq_version = string_field(j, {"version"}, source);
    if (c.bits < 0) fail(source, "'bits' must be positive");
    if (c.group_size == 0 && j.contains("group_size")) fail(source, "'group_size' must be -1 or positive");
    return c;
}

std::optional<QuantConfig> detect_quant_config(const std::string &dir) {
    for (const char *name : {"quantize_config.json", "quant_config.json", "config.json"}) {
        const std::string path = dir + "/" + name;
        struct stat st {};
        if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        QuantConfig c = parse_quant_config(read_bounded_file(path, kMaxConfigBytes, name), path);
        // AutoGPTQ's file states no method: it is GPTQ by name.
        if (c.method.empty() && c.bits != 0 && std::string(name) == "quantize_config.json") c.method = "gptq";
        if (!c.method.empty() || c.bits != 0) return c;
    }
    return std::nullopt;
}

}  // namespace ipex::woq
