// ipex_tool::calibrate_file and ipex_tool::quantize_file: `ipex_tool.quantization` in Python.
// They run the drivers of `ipex-tool calibrate` and `ipex-tool quantize` (commands/calibrate.h,
// commands/quantize.h) on files: the model Python traced, the batches it recorded, the qconfig.
#pragma once

#include <string>

namespace ipex::pybridge {

// Calibrates `model` on the batches in `data` (a file or a directory of them) and writes the
// qconfig to `out`. `options_json`: "recipe" (a recipe file), "observer", "smooth_quant"
// (alpha), "max_batches"; or "ipex_summary" (IPEX's qconfig summary, converted for the model;
// `data` then ""). Returns the report: "out", "observer", "ops", "batches", "text",
// "warnings".
std::string calibrate_file(const std::string &model, const std::string &data, const std::string &out,
                           const std::string &options_json);

// Converts `model` to INT8 into `out`. `options_json`: "qconfig" (static) or "dynamic": true,
// "portable", "mixed_dtype" ("fp32" | "bf16"). Returns the quantizer's report with "text" and
// "warnings".
std::string quantize_file(const std::string &model, const std::string &out, const std::string &options_json);

}  // namespace ipex::pybridge
