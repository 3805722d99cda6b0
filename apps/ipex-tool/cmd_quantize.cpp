// ipex-tool quantize MODEL OUT --qconfig FILE | --dynamic: see man ipex-tool(1), ipex-qconfig(5).
#include "base/log.h"
#include "commands.h"
#include "commands/quantize.h"

namespace ipex::app {

Runner setup_quantize(CLI::App &sub) {
    auto r = std::make_shared<commands::QuantizeRequest>();
    sub.add_option("MODEL", r->model, "TorchScript model to convert")->required();
    sub.add_option("OUT", r->out, "where to write the INT8 model")->required();
    sub.add_option("--qconfig", r->qconfig, "qconfig JSON written by 'ipex-tool calibrate'");
    sub.add_flag("--portable", r->portable,
                 "stock PyTorch quantized ops (onednn engine) that stock torch runs; default: ipex int8 ops "
                 "(prepacked oneDNN int8, needs libipex_ops.so)");
    sub.add_option("--mixed-dtype", r->mixed_dtype, "dtype of float ops outside the int8 regions (bf16: all of them, "
                   "quantizable ops the qconfig does not list included; outputs stay fp32)")
        ->check(CLI::IsMember({"fp32", "bf16"}))
        ->capture_default_str();
    sub.add_flag("--dynamic", r->dynamic, "dynamic INT8 linear layers (weights int8, activations per batch); "
                                          "no calibration");
    return [r] {
        log::info(commands::run_quantize(*r).text());
        return 0;
    };
}

}  // namespace ipex::app
