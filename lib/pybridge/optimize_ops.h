// ipex_tool::optimize_file and the fp32 math mode: `ipex_tool.optimize` and
// `ipex_tool.set_fp32_math_mode` in Python. optimize_file runs the driver of `ipex-tool optimize`
// (commands/optimize.h) with the request Python built; the math mode is the value optimize uses
// when the request does not name one.
#pragma once

#include <string>

namespace ipex::pybridge {

// Optimizes the TorchScript file `src` into `dst`. `options_json` is an object with the
// request's fields: "dtype", "level", "portable", "keep_dtype", "knobs" ({flag: bool}, the
// flags of passes/knobs.h), "sample_inputs" ([SPEC]), "seed", "fp32_math_mode". Returns the
// optimize report as JSON text, with "text" (the line the CLI logs) and "warnings".
std::string optimize_file(const std::string &src, const std::string &dst, const std::string &options_json);

// The knob table of passes/knobs.h as recipes/optimize-levels.json has it ("levels", "help").
std::string knob_table();

// "fp32" or "bf32"; anything else is a usage error.
void set_fp32_math_mode(const std::string &mode);
std::string get_fp32_math_mode();

}  // namespace ipex::pybridge
