// The qconfig: a hand-editable JSON record of how to quantize one model (format in
// man/ipex-qconfig.5, schema in recipes/schema/qconfig.schema.json). Loading validates
// every field and names the op and field at fault (exit 3); nothing is trusted.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quant/observers.h"

namespace ipex::quant {

constexpr int kQConfigVersion = 1;
constexpr const char *kQConfigFormat = "ipex-qconfig";
// Bounds on untrusted input.
constexpr uint64_t kMaxQConfigBytes = uint64_t(256) << 20;
constexpr size_t kMaxQConfigOps = 100000;
constexpr size_t kMaxChannels = size_t(1) << 24;

// Per-tensor parameters of an activation (an op's input or output).
struct TensorQ {
    QDtype dtype = QDtype::u8;
    double scale = 1.0;
    int64_t zero_point = 0;
    std::optional<ObserverParams> observer;  // how the numbers were found (informational)
};

// Per-output-channel symmetric int8 weight parameters (zero points all 0).
struct WeightQ {
    std::vector<double> scales;
};

// A residual add the op's output feeds (optionally followed by relu), done in int8.
struct AddQ {
    TensorQ other;   // the other operand
    TensorQ output;  // the add (or its relu) output
    bool relu = false;
};

// What to do with one quantizable op.
struct OpConfig {
    std::string id;      // stable id: "<module path>:<kind>:<occurrence>"
    std::string module;  // module path ("layer1.0.conv1"), "" at top level
    std::string kind;    // conv1d conv2d conv3d linear matmul
    std::string dtype = "int8";  // int8 | fp32 | bf16 (edit to keep an op out of int8)
    TensorQ input, output;
    WeightQ weight;
    bool relu = false;           // a relu is fused (output is after it); informational
    std::optional<AddQ> add;     // fused residual add, when the graph has one
    std::vector<double> smooth_factors;  // SmoothQuant per-input-channel factors, or empty
};

struct QConfig {
    int version = kQConfigVersion;
    std::string identity;  // of the model it was made for
    std::string source;    // the model file calibrate read (informational)
    std::optional<double> smooth_quant_alpha;
    nlohmann::json recipe = nlohmann::json::object();  // the recipe calibrate used
    std::vector<OpConfig> ops;

    const OpConfig *find(const std::string &id) const;
};

// Parses and validates a qconfig; `where` names it in errors (exit 3).
QConfig parse_qconfig(const std::string &text, const std::string &where);
// Reads a file (size-bounded) then parse_qconfig.
QConfig load_qconfig(const std::string &path);
nlohmann::json qconfig_to_json(const QConfig &config);

const std::vector<std::string> &quantizable_kinds();
bool is_op_dtype(const std::string &dtype);

}  // namespace ipex::quant
