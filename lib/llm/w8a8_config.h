// The SmoothQuant qconfig of a decoder (`ipex-tool calibrate-llm` writes it, `--qconfig` reads
// it): per projection the calibrated max |x| and max |W| of each input channel, the smoothing
// factors s_j = (max|X_j| + eps)^alpha / (max|W_j| + eps)^(1 - alpha) (IPEX's formula, eps 1e-6)
// and the static int8 step of the smoothed activation, max_j(max|X_j| / s_j) / 127. Projections
// are named as the model merges them: model.layers.L.self_attn.qkv_proj (q, k, v read one
// input), .self_attn.o_proj, .mlp.gate_up_proj, .mlp.down_proj; lm_head stays in floating point.
// Format in docs/woq-and-llm.md ("SmoothQuant W8A8").
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "llm/config.h"
#include "llm/w8a8.h"

namespace ipex::llm {

constexpr const char *kW8A8Format = "ipex-tool-smoothquant";
constexpr int kW8A8Version = 1;
constexpr double kSmoothEps = 1e-6;

// One projection's calibration.
struct W8A8Observation {
    std::string name;
    std::vector<float> act_max, weight_max;  // [in_features]
};

// The four projection names of layer `layer` in the order a layer runs them; the first and
// third read an RMSNorm's output (their 1/s folds into that norm).
std::vector<std::string> w8a8_projection_names(int64_t layer);

// The qconfig JSON of these observations. Exit 3 naming the projection when an observed
// maximum is not finite (the fp32 model produced NaN/Inf on the text).
nlohmann::json w8a8_config_json(const std::vector<W8A8Observation> &observed, double alpha, int64_t tokens,
                                const ModelConfig &config);

// The qconfig at `path` checked against the model: every projection present with
// in_features channels, every factor finite and > 0, the scale finite and > 0; exit 3 naming
// the file and the field otherwise, exit 4 for a model with sparse (MoE) layers.
// IPEX's qconfig summary (llm/w8a8_ipex_summary.h) is read as well.
std::map<std::string, W8A8Spec> read_w8a8_config(const std::string &path, const ModelConfig &config);
// The same for JSON already parsed; `path` names it in messages.
std::map<std::string, W8A8Spec> w8a8_config_from_json(const nlohmann::json &j, const ModelConfig &config,
                                                      const std::string &path);
// Exit 4 for a model W8A8 does not cover (mixture-of-experts layers).
void check_w8a8_model(const ModelConfig &config);

}  // namespace ipex::llm
