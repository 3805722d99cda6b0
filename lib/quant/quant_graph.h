// The graph view shared by calibrate and quantize: the model frozen and folded the same
// way both times (fp32, no layout change), its quantizable ops with stable ids, the
// relu/add each op fuses, and an identity that ties a qconfig to the model it came from.
#pragma once

#include <torch/csrc/jit/ir/ir.h>
#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "passes/pipeline.h"

#include <optional>
#include <string>
#include <vector>

namespace ipex::quant {

// One quantizable op: conv1d/2d/3d or linear with constant weight, or matmul whose second
// operand is a constant 2-D tensor (weight is then its transpose, [out, in]), in the
// graph's top-level block (ops inside if/loop blocks stay fp32).
struct QuantOp {
    torch::jit::Node *node = nullptr;
    std::string id;      // "<module path>:<kind>:<occurrence within that module and kind>"
    std::string module;  // "" when the op came from no submodule
    std::string kind;    // conv1d conv2d conv3d linear matmul
    torch::jit::Value *input = nullptr;
    at::Tensor weight;             // [out, in, k...] or [out, in]
    std::optional<at::Tensor> bias;
    std::vector<int64_t> stride, padding, dilation;  // conv only
    int64_t groups = 1;

    // Fusion (decided from the graph alone, so calibrate and quantize agree):
    torch::jit::Node *relu = nullptr;      // sole user of the op output
    torch::jit::Node *add = nullptr;       // sole user of the (relu) output: aten::add, alpha 1
    torch::jit::Value *add_other = nullptr;
    torch::jit::Node *add_relu = nullptr;  // sole user of the add output
    // The op's own (fused relu) output and the output of the whole fused chain.
    torch::jit::Value *output() const;
    torch::jit::Value *chain_output() const;
};

struct PreparedModel {
    torch::jit::Module module;  // frozen copy; the input model is not modified
    std::shared_ptr<torch::jit::Graph> graph;
    std::vector<QuantOp> ops;
    std::string identity;
    nlohmann::json report;  // the freeze/fold pipeline's report (passes, warnings)
    std::vector<passes::PassOutcome> passes;  // the same passes, typed
    // Quantizable-looking ops inside if/loop blocks, which stay fp32: "<module>: <kind> inside
    // a prim::If block (...)" (see nested_quant_ops).
    std::vector<std::string> nested_fp32;
};

// conv/linear/matmul ops with constant weights inside prim::If / prim::Loop blocks: they are
// not quantized (calibration observes top-level values only) and stay fp32. One line per
// module, op kind and enclosing block, with the number of ops when there are several.
std::vector<std::string> nested_quant_ops(const std::shared_ptr<torch::jit::Graph> &graph);

// Freezes and folds a copy of `input` (dropout removed, BN folded into conv/linear, in-place
// ops made functional) and finds its quantizable ops.
PreparedModel prepare_for_quantization(const torch::jit::Module &input);

// Re-finds the quantizable ops of a prepared graph (after a rewrite changed it).
std::vector<QuantOp> find_quant_ops(const std::shared_ptr<torch::jit::Graph> &graph);

// Hash of the prepared graph's structure and weight shapes, as hex.
std::string model_identity(const std::shared_ptr<torch::jit::Graph> &graph,
                           const std::vector<QuantOp> &ops);

}  // namespace ipex::quant
