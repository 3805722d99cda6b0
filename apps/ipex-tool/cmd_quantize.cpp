// ipex-tool quantize MODEL OUT --qconfig FILE | --dynamic: see man ipex-tool(1), ipex-qconfig(5).
#include "commands.h"
#include "base/atomic_file.h"
#include "base/errors.h"
#include "base/log.h"
#include "model/load.h"
#include "quant/qconfig.h"
#include "quant/quantize.h"

namespace ipex::app {
namespace {

struct QuantizeArgs {
    std::string model, out, qconfig, mixed_dtype = "fp32";
    bool portable = false, dynamic = false;
};

int run_quantize(const QuantizeArgs &a) {
    if (a.dynamic == !a.qconfig.empty())
        throw_usage(a.dynamic ? "--dynamic needs no --qconfig; give one of them"
                              : "give --qconfig FILE (from 'ipex-tool calibrate') or --dynamic");
    const quant::QConfig config = a.dynamic ? quant::QConfig{} : quant::load_qconfig(a.qconfig);
    const model::LoadedModel input = model::load_model(a.model);
    check_output_path(a.out, a.dynamic ? std::vector<std::string>{a.model} : std::vector<std::string>{a.model, a.qconfig});

    quant::QuantizeOptions options;
    options.portable = a.portable;
    options.dynamic = a.dynamic;
    options.mixed_dtype = a.mixed_dtype;
    const quant::QuantizeResult result = quant::quantize_model(input.module, config, a.qconfig, options);
    nlohmann::json metadata = {{"tool", "ipex-tool"}, {"version", IPEX_TOOL_VERSION}, {"dtype", "int8"}, {"level", "O1"},
                               {"portable", result.report["portable"]}, {"source", absolute_path(a.model)}, {"quantize", result.report}};
    if (!a.dynamic) metadata["qconfig"] = absolute_path(a.qconfig);
    model::save_model(result.module, a.out, metadata);
    log::info("wrote " + a.out + " (" + result.report["mode"].get<std::string>() + " int8: " +
              std::to_string(result.report["int8_ops"].get<int>()) + " ops)");
    return 0;
}

}  // namespace

Runner setup_quantize(CLI::App &sub) {
    auto a = std::make_shared<QuantizeArgs>();
    sub.add_option("MODEL", a->model, "TorchScript model to convert")->required();
    sub.add_option("OUT", a->out, "where to write the INT8 model")->required();
    sub.add_option("--qconfig", a->qconfig, "qconfig JSON written by 'ipex-tool calibrate'");
    sub.add_flag("--portable", a->portable,
                 "stock PyTorch quantized ops (onednn engine) that stock torch runs; default: ipex int8 ops "
                 "(prepacked oneDNN int8, needs libipex_ops.so)");
    sub.add_option("--mixed-dtype", a->mixed_dtype, "dtype of float ops outside the int8 regions (bf16: all of them, "
                   "quantizable ops the qconfig does not list included; outputs stay fp32)")
        ->check(CLI::IsMember({"fp32", "bf16"}))
        ->capture_default_str();
    sub.add_flag("--dynamic", a->dynamic, "dynamic INT8 linear layers (weights int8, activations per batch); "
                                          "no calibration");
    return [a] { return run_quantize(*a); };
}

}  // namespace ipex::app
