// Pass: replace aten::linear calls by ipex::woq_linear (weight-only int4/int8).
// Needs a frozen graph: weights are constants and nodes carry the module call stack, so a
// Linear is matched to a checkpoint layer by its module path ("model.layers.0.mlp.up_proj").
// With a checkpoint, Linears without a layer (missing), with other shapes (mismatched) and
// layers no Linear uses (unused) are errors unless allow_partial; modules the checkpoint kept
// in full precision are left alone. Without a checkpoint every Linear whose input channels
// the group size divides is quantized round-to-nearest. No-op when nothing matches.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

#include "ir/pass_result.h"
#include "checkpoint/woq_format.h"

namespace ipex::woq {

struct WoqReplaceOptions {
    const WoqCheckpoint *checkpoint = nullptr;  // match layers by module path
    int rtn_bits = 0;                 // no checkpoint: quantize with this many bits (4 | 8)
    int64_t rtn_group_size = -1;      // ... and this group size (-1: per output channel)
    std::string lowp_mode = "fp32";   // fp32 | bf16 | int8 (resolved, not "auto")
    bool allow_partial = false;
    // The model before freezing: call stacks omit containers without forward (ModuleList,
    // ModuleDict), so "model.0.mlp" is resolved to "model.layers.0.mlp" through it.
    const torch::jit::Module *module = nullptr;
};

struct WoqReplaceReport {
    passes::PassResult pass;
    std::vector<std::string> replaced;    // module paths
    std::vector<std::string> missing;     // Linears the checkpoint has no layer for
    std::vector<std::string> mismatched;  // "<path>: <why>"
    std::vector<std::string> unused;      // checkpoint layers no Linear uses
    std::vector<std::string> kept;        // Linears the checkpoint keeps in full precision
    nlohmann::json to_json() const;
};

// Throws exit 3 (checkpoint does not fit the model) unless options.allow_partial.
WoqReplaceReport replace_woq_linear(std::shared_ptr<torch::jit::Graph> &graph, const WoqReplaceOptions &options);

}  // namespace ipex::woq
