// Builders for small scripted modules, freezing, running graphs and comparing outputs,
// shared by the graph-pass tests.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ipex::passes::testing {

using Params = std::vector<std::pair<std::string, at::Tensor>>;
using Children = std::vector<std::pair<std::string, torch::jit::Module>>;

// A scripted module with a `training` flag, parameters, submodules and TorchScript methods.
torch::jit::Module make_module(const std::string &type_name, const std::string &source,
                               const Params &params = {}, const Children &children = {});

// Convolution module calling `op` (conv1d/2d/3d, conv_transpose1d/2d/3d) with weight
// shape from in/out channels, kernel and groups; spatial rank follows the op name.
struct ConvSpec {
    std::string op = "conv2d";
    int64_t in = 4;
    int64_t out = 8;
    int64_t kernel = 3;
    int64_t groups = 1;
    int64_t stride = 1;
    int64_t padding = 1;
    bool bias = true;
};
torch::jit::Module conv_module(const ConvSpec &spec);
torch::jit::Module batch_norm_module(int64_t channels, bool affine = true);
torch::jit::Module linear_module(int64_t in, int64_t out, bool bias = true);

struct Frozen {
    torch::jit::Module module;
    std::shared_ptr<torch::jit::Graph> graph;  // forward's graph, inlined
};
// eval() + freeze_module, as the optimize pipeline does.
Frozen freeze(torch::jit::Module module);

// Runs a copy of `graph` (input 0 is the frozen module) on inputs.
c10::IValue run_graph(const std::shared_ptr<torch::jit::Graph> &graph, const torch::jit::Module &self,
                      std::vector<c10::IValue> inputs);

// All tensors inside an IValue (tuples, lists, dicts), in order.
std::vector<at::Tensor> flatten_tensors(const c10::IValue &value);

// max |got - want| / max |want| over all tensors (both flattened, compared in fp64).
double max_relative_error(const c10::IValue &got, const c10::IValue &want);
// Cosine similarity of all tensors concatenated.
double cosine_similarity(const c10::IValue &got, const c10::IValue &want);

int count(const std::shared_ptr<torch::jit::Graph> &graph, const std::string &kind);

constexpr double kFp32Tolerance = 1e-4;     // max relative error, fp32 rewrites
constexpr double kLowpMinCosine = 0.999;    // bf16 against fp32

}  // namespace ipex::passes::testing
