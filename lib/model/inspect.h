// `ipex-tool inspect`: what a TorchScript model is made of and what it needs to run.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include <string>

#include "model/load.h"

namespace ipex::model {

// The full report (schema in man/ipex-tool.1, INSPECT). Does not modify the model.
nlohmann::json inspect_model(const LoadedModel &model);

// Human-readable rendering of inspect_model's JSON.
std::string format_inspect(const nlohmann::json &report);

// Inlined copy of forward's graph (the model is left untouched).
std::shared_ptr<torch::jit::Graph> inlined_forward(const torch::jit::Module &module);

// Dtype a model computes in, read from its optimize metadata or, failing that, from the
// floating-point constants of its forward graph ("fp32", "bf16", "fp16").
std::string compute_dtype(const LoadedModel &model);

// The dtype whose precision the model's arithmetic has: compute_dtype, except bf16 for fp32
// models optimized with --fp32-math-mode bf32 (recorded in the metadata).
std::string precision_dtype(const LoadedModel &model);

}  // namespace ipex::model
