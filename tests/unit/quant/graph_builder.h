// Small TorchScript graphs for the quantize passes' tests: a node added by kind, the graph run on
// inputs (its single output a tuple), the nodes of a kind counted.
#pragma once

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

namespace ipex::quant::graph_builder {

// A node of `kind` reading `inputs`, inserted at the graph's insert point, its output a tensor.
inline torch::jit::Node *add(torch::jit::Graph &g, const char *kind, std::vector<torch::jit::Value *> inputs) {
    torch::jit::Node *n = g.insertNode(g.create(c10::Symbol::fromQualString(kind), inputs));
    n->output()->setType(c10::TensorType::get());
    return n;
}

// The elements of the tuple the graph returns, run on a copy of it.
inline std::vector<c10::IValue> run(const std::shared_ptr<torch::jit::Graph> &g, std::vector<c10::IValue> inputs) {
    torch::jit::GraphFunction fn("forward", g->copy(), nullptr);
    fn.run(inputs);
    return inputs[0].toTupleRef().elements().vec();
}

inline int count(const std::shared_ptr<torch::jit::Graph> &g, const char *kind) {
    int n = 0;
    for (const torch::jit::Node *node : g->nodes()) n += node->kind().toQualString() == std::string(kind);
    return n;
}

}  // namespace ipex::quant::graph_builder
