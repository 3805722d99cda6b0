#include "commands/quantize.h"

#include "base/atomic_file.h"
#include "base/errors.h"
#include "model/load.h"
#include "quant/ipex_summary.h"
#include "quant/qconfig.h"
#include "quant/quantize.h"

namespace ipex::commands {

void QuantizeRequest::check() const {
    if (dynamic == !qconfig.empty())
        throw_usage(dynamic ? "--dynamic needs no --qconfig; give one of them"
                            : "give --qconfig FILE (from 'ipex-tool calibrate') or --dynamic");
}

std::string QuantizeReport::text() const {
    return "wrote " + out + " (" + conversion["mode"].get<std::string>() + " int8: " +
           std::to_string(conversion["int8_ops"].get<int>()) + " ops)";
}

QuantizeReport run_quantize(const QuantizeRequest &r) {
    r.check();
    const model::LoadedModel input = model::load_model(r.model);
    const quant::QConfig config = r.dynamic ? quant::QConfig{} : quant::load_qconfig_for_model(r.qconfig, input.module);
    check_output_path(r.out, r.dynamic ? std::vector<std::string>{r.model} : std::vector<std::string>{r.model, r.qconfig});

    quant::QuantizeOptions options;
    options.portable = r.portable;
    options.dynamic = r.dynamic;
    options.mixed_dtype = r.mixed_dtype;
    const quant::QuantizeResult result = quant::quantize_model(input.module, config, r.qconfig, options);
    nlohmann::json metadata = {{"tool", "ipex-tool"}, {"version", IPEX_TOOL_VERSION}, {"dtype", "int8"}, {"level", "O1"},
                               {"portable", result.report["portable"]}, {"source", absolute_path(r.model)},
                               {"quantize", result.report}};
    if (!r.dynamic) metadata["qconfig"] = absolute_path(r.qconfig);
    model::save_model(result.module, r.out, metadata);
    return {r.out, result.report};
}

}  // namespace ipex::commands
