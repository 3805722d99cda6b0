// The `ipex_tool` TorchScript namespace: the library's drivers as ops the Python package
// (python/ipex_tool) calls through torch.ops. Files, JSON options and JSON reports cross the
// boundary; models stay TorchScript files, as the CLI has them. This is the one
// TORCH_LIBRARY(ipex_tool, m); the `ipex` ops the optimized models hold come from
// libipex_ops.so, which this library links.
#include <torch/library.h>

#include "pybridge/llm_ops.h"
#include "pybridge/optimize_ops.h"
#include "pybridge/quantize_ops.h"
#include "pybridge/runtime_ops.h"

TORCH_LIBRARY(ipex_tool, m) {
    m.def("optimize_file(str src, str dst, str options_json) -> str", &ipex::pybridge::optimize_file);
    m.def("calibrate_file(str model, str data, str out, str options_json) -> str", &ipex::pybridge::calibrate_file);
    m.def("quantize_file(str model, str out, str options_json) -> str", &ipex::pybridge::quantize_file);
    m.def("knob_table() -> str", &ipex::pybridge::knob_table);
    m.def("set_fp32_math_mode(str mode) -> ()", &ipex::pybridge::set_fp32_math_mode);
    m.def("get_fp32_math_mode() -> str", &ipex::pybridge::get_fp32_math_mode);
    m.def("llm_load(str dir, str options_json) -> str", &ipex::pybridge::llm_load);
    m.def("llm_generate(int handle, str request_json) -> str", &ipex::pybridge::llm_generate);
    m.def("llm_release(int handle) -> ()", &ipex::pybridge::llm_release);
    m.def("cpu_pool(str options_json) -> str", &ipex::pybridge::cpu_pool);
    m.def("pin_thread(str options_json) -> str", &ipex::pybridge::pin_thread);
    m.def("thread_info() -> str", &ipex::pybridge::thread_info);
}
