// `ipex-tool quantize MODEL OUT`: INT8 conversion with a qconfig from `ipex-tool calibrate`
// (static) or of the linear layers alone (--dynamic); the model written with its metadata.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ipex::commands {

struct QuantizeRequest {
    std::string model, out;
    std::string qconfig;               // static INT8: the qconfig file
    bool dynamic = false;              // dynamic INT8 linear layers, no qconfig
    bool portable = false;             // stock PyTorch quantized ops
    std::string mixed_dtype = "fp32";  // fp32 | bf16: float ops outside the int8 regions

    // Exit 2 unless exactly one of --qconfig and --dynamic is given.
    void check() const;
};

struct QuantizeReport {
    std::string out;
    nlohmann::json conversion;  // the quantizer's report: "mode", "int8_ops", ...

    // "wrote OUT (MODE int8: N ops)": the line quantize logs.
    std::string text() const;
};

QuantizeReport run_quantize(const QuantizeRequest &request);

}  // namespace ipex::commands
