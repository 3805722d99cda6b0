#include "pybridge/quantize_ops.h"

#include "base/errors.h"
#include "base/json_io.h"
#include "commands/calibrate.h"
#include "commands/quantize.h"
#include "pybridge/op_guard.h"

namespace ipex::pybridge {

std::string calibrate_file(const std::string &model, const std::string &data, const std::string &out,
                           const std::string &options_json) {
    return run_guarded_op("calibrate", [&] {
               const nlohmann::json options =
                   parse_options("calibrate", options_json,
                                 {"recipe", "observer", "smooth_quant", "max_batches", "ipex_summary"});
               const JsonReader read(options, "calibrate options");
               commands::CalibrateRequest r;
               r.model = model;
               r.data = data;
               r.out = out;
               r.ipex_summary = read.str_or("ipex_summary", "");
               r.recipe = read.str_or("recipe", "");
               r.observer = read.str_or("observer", "");
               if (read.has("smooth_quant")) {
                   const double alpha = read.number("smooth_quant");
                   if (alpha < 0 || alpha > 1) throw_usage("smooth_quant alpha " + std::to_string(alpha) + " is outside [0, 1]");
                   r.smooth_quant = alpha;
               }
               r.max_batches = read.integer_or("max_batches", 0, 0);
               const commands::CalibrateReport report = commands::run_calibrate(r);
               return nlohmann::json{{"out", report.out},
                                     {"observer", report.observer},
                                     {"ops", report.ops},
                                     {"batches", report.batches},
                                     {"text", report.text()}};
           })
        .dump();
}

std::string quantize_file(const std::string &model, const std::string &out, const std::string &options_json) {
    return run_guarded_op("quantize", [&] {
               const nlohmann::json options =
                   parse_options("quantize", options_json, {"qconfig", "dynamic", "portable", "mixed_dtype"});
               const JsonReader read(options, "quantize options");
               commands::QuantizeRequest r;
               r.model = model;
               r.out = out;
               r.qconfig = read.str_or("qconfig", "");
               r.dynamic = read.boolean_or("dynamic", false);
               r.portable = read.boolean_or("portable", false);
               r.mixed_dtype = read.str_or("mixed_dtype", r.mixed_dtype);
               if (r.mixed_dtype != "fp32" && r.mixed_dtype != "bf16")
                   throw_usage("mixed_dtype '" + r.mixed_dtype + "' is not one of fp32, bf16");
               r.check();
               const commands::QuantizeReport report = commands::run_quantize(r);
               nlohmann::json j = report.conversion;
               j["out"] = report.out;
               j["text"] = report.text();
               return j;
           })
        .dump();
}

}  // namespace ipex::pybridge
