#include "quant/elementwise_maps.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/ir/constants.h>

#include <set>
#include <string>
#include <vector>

#include "passes/graph_utils.h"

namespace ipex::quant {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// Elementwise activations of one tensor (and their in-place forms): y[i] depends on x[i] alone.
bool is_elementwise_activation(const Node *node) {
    static const std::set<std::string> kinds = {
        "silu", "sigmoid", "tanh", "relu", "relu6", "hardtanh", "hardswish", "hardsigmoid", "gelu", "elu", "selu",
        "celu", "leaky_relu", "mish", "softplus", "clamp", "clamp_min", "clamp_max", "abs", "neg"};
    if (node->kind().ns().toUnqualString() != std::string("aten") || node->outputs().size() != 1 ||
        node->inputs().empty())
        return false;
    std::string name = node->kind().toUnqualString();
    if (name.back() == '_') name.pop_back();
    if (!kinds.count(name)) return false;
    for (size_t i = 1; i < node->inputs().size(); ++i)
        if (!torch::jit::toIValue(node->input(i))) return false;  // arguments must be constants
    return true;
}

// The chain after `dequantized`: each op's input read by it alone.
std::vector<Node *> chain_after(Value *dequantized) {
    std::vector<Node *> chain;
    for (Value *v = dequantized; v->uses().size() == 1;) {
        Node *user = v->uses()[0].user;
        if (v->uses()[0].offset != 0 || !is_elementwise_activation(user) || user->owningBlock() != v->node()->owningBlock())
            break;
        chain.push_back(user);
        v = user->output();
    }
    return chain;
}

// The 256 values a byte of `q` stands for, in byte order (an s8 byte is two's complement).
at::Tensor dequantized_bytes(const TensorQ &q) {
    const at::Tensor bytes = at::arange(256, at::kInt);
    const at::Tensor values = q.dtype == QDtype::s8 ? bytes.to(at::kChar).to(at::kInt) : bytes;
    return (values - static_cast<int32_t>(q.zero_point)).to(at::kFloat) * static_cast<float>(q.scale);
}

// Runs the chain's own ops on x.
at::Tensor run_chain(const std::vector<Node *> &chain, at::Tensor x) {
    for (Node *node : chain) {
        torch::jit::Stack stack{x};
        for (size_t i = 1; i < node->inputs().size(); ++i) stack.push_back(*torch::jit::toIValue(node->input(i)));
        node->getOperation()(stack);
        x = stack.back().toTensor();
    }
    return x;
}

// The quantize parameters when every reader of `v` is an ipex::quantize_per_tensor with the
// same constant ones.
bool only_quantized(Value *v, double *scale, int64_t *zero_point, int64_t *dtype) {
    static const auto kQuantize = c10::Symbol::fromQualString("ipex::quantize_per_tensor");
    bool first = true;
    for (const auto &use : v->uses()) {
        const Node *q = use.user;
        if (q->kind() != kQuantize || use.offset != 0) return false;
        const auto s = torch::jit::toIValue(q->input(1)), z = torch::jit::toIValue(q->input(2)),
                   t = torch::jit::toIValue(q->input(3));
        if (!s || !z || !t) return false;
        if (first) {
            *scale = s->toDouble(), *zero_point = z->toInt(), *dtype = t->toInt();
            first = false;
        } else if (s->toDouble() != *scale || z->toInt() != *zero_point || t->toInt() != *dtype) {
            return false;
        }
    }
    return !first;
}

at::Tensor quantized_bytes(const at::Tensor &values, double scale, int64_t zero_point, int64_t dtype) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::quantize_per_tensor", "")
                               .typed<at::Tensor(const at::Tensor &, double, int64_t, at::ScalarType)>();
    const at::Tensor q = op.call(values, scale, zero_point, static_cast<at::ScalarType>(dtype));
    return at::from_blob(q.data_ptr(), {256}, at::kByte).clone();
}

}  // namespace

MapCounts map_elementwise_chains(Graph &graph, const std::function<const TensorQ *(Value *)> &params_of) {
    MapCounts counts;
    static const std::vector<c10::Symbol> kinds = {c10::Symbol::aten("dequantize")};
    for (Node *dq : passes::collect_nodes_of_kind(graph.block(), kinds)) {
        if (dq->inputs().size() != 1) continue;
        const TensorQ *q = params_of(dq->input(0));
        const std::vector<Node *> chain = chain_after(dq->output());
        if (!q || chain.empty()) continue;
        Value *end = chain.back()->output();
        const at::Tensor table = run_chain(chain, dequantized_bytes(*q)).contiguous();
        if (table.scalar_type() != at::kFloat || table.sizes() != at::IntArrayRef{256}) continue;
        torch::jit::WithInsertPoint guard(dq);
        double scale = 0;
        int64_t zero_point = 0, dtype = 0;
        if (only_quantized(end, &scale, &zero_point, &dtype)) {
            Value *bytes = graph.insertConstant(quantized_bytes(table, scale, zero_point, dtype));
            Value *mapped = graph.insert(c10::Symbol::fromQualString("ipex::int8_requantize_map"),
                                         {dq->input(0), bytes, scale, zero_point, dtype});
            const std::vector<torch::jit::Use> uses = end->uses();
            for (const auto &use : uses) {
                mapped->setType(use.user->output()->type());
                use.user->output()->replaceAllUsesWith(mapped);
                use.user->destroy();
            }
            ++counts.int8;
        } else {
            Value *mapped = graph.insert(c10::Symbol::fromQualString("ipex::int8_map"),
                                         {dq->input(0), graph.insertConstant(table)});
            mapped->setType(end->type());
            end->replaceAllUsesWith(mapped);
            ++counts.fp32;
        }
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) (*it)->destroy();
        dq->destroy();
    }
    return counts;
}

}  // namespace ipex::quant
