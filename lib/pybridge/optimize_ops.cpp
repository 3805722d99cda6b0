#include "pybridge/optimize_ops.h"

#include <atomic>

#include "base/errors.h"
#include "base/json_io.h"
#include "commands/optimize.h"
#include "passes/knobs.h"
#include "pybridge/op_guard.h"

namespace ipex::pybridge {
namespace {

// The process's fp32 math mode (IPEX's is global too): false fp32, true bf32.
std::atomic<bool> g_bf32{false};

const char *math_mode_name(bool bf32) { return bf32 ? "bf32" : "fp32"; }

void check_member(const std::string &field, const std::string &value, std::initializer_list<const char *> allowed) {
    std::string list;
    for (const char *a : allowed) {
        if (value == a) return;
        list += std::string(list.empty() ? "" : ", ") + a;
    }
    throw_usage(field + " '" + value + "' is not one of " + list);
}

commands::OptimizeRequest optimize_request(const std::string &src, const std::string &dst, const std::string &options_json) {
    const nlohmann::json options =
        parse_options("optimize", options_json,
                      {"dtype", "level", "portable", "keep_dtype", "knobs", "sample_inputs", "seed", "fp32_math_mode"});
    const JsonReader read(options, "optimize options");
    commands::OptimizeRequest r;
    r.in = src;
    r.out = dst;
    r.dtype = read.str_or("dtype", r.dtype);
    check_member("dtype", r.dtype, {"fp32", "bf16", "fp16"});
    r.level = read.str_or("level", r.level);
    check_member("level", r.level, {"O0", "O1"});
    r.portable = read.boolean_or("portable", false);
    r.keep_dtype = read.boolean_or("keep_dtype", false);
    r.seed = static_cast<uint64_t>(read.integer_or("seed", 0, 0));
    r.fp32_math_mode = read.str_or("fp32_math_mode", math_mode_name(g_bf32));
    check_member("fp32_math_mode", r.fp32_math_mode, {"fp32", "bf32"});
    if (read.has("knobs")) {
        const JsonReader knobs = read.object("knobs");
        for (const auto &[flag, on] : knobs.value().items()) {
            if (!passes::find_knob(flag)) throw_usage("unknown knob '" + flag + "'");
            r.knob_overrides[flag] = knobs.boolean(flag.c_str());
        }
    }
    if (read.has("sample_inputs"))
        for (const nlohmann::json &spec : read.array("sample_inputs")) {
            if (!spec.is_string()) throw_usage("sample_inputs: every entry is an input SPEC string");
            r.sample_inputs.push_back(spec.get<std::string>());
        }
    return r;
}

}  // namespace

std::string optimize_file(const std::string &src, const std::string &dst, const std::string &options_json) {
    return run_guarded_op("optimize", [&] {
               const commands::OptimizeReport report = commands::run_optimize(optimize_request(src, dst, options_json));
               nlohmann::json j = report.to_json();
               j["text"] = report.text();
               return j;
           })
        .dump();
}

std::string knob_table() { return passes::levels_json().dump(); }

void set_fp32_math_mode(const std::string &mode) {
    run_guarded_op("set_fp32_math_mode", [&] {
        check_member("mode", mode, {"fp32", "bf32"});
        g_bf32 = mode == "bf32";
        return nlohmann::json::object();
    });
}

std::string get_fp32_math_mode() { return math_mode_name(g_bf32); }

}  // namespace ipex::pybridge
