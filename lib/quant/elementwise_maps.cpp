#include "quant/elementwise_maps.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/constants.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/graph_utils.h"

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
        if (v->uses()[0].offset != 0 || !is_elementwise_activation(user) ||
            user->owningBlock() != v->node()->owningBlock())
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

// `fused` in place of every quantize reading `v` (only_quantized said they all are).
void replace_quantizes(Value *v, Value *fused) {
    const std::vector<torch::jit::Use> uses = v->uses();
    for (const auto &use : uses) {
        fused->setType(use.user->output()->type());
        use.user->output()->replaceAllUsesWith(fused);
        use.user->destroy();
    }
}

at::Tensor quantized_bytes(const at::Tensor &values, double scale, int64_t zero_point, int64_t dtype) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::quantize_per_tensor", "")
                               .typed<at::Tensor(const at::Tensor &, double, int64_t, at::ScalarType)>();
    const at::Tensor q = op.call(values, scale, zero_point, static_cast<at::ScalarType>(dtype));
    return at::from_blob(q.data_ptr(), {256}, at::kByte).clone();
}

// The int8 values a batch norm's input concatenates on dim 1 (or is), all dequantized with
// known parameters; empty otherwise.
std::vector<Value *> dequantized_parts(Value *x, const std::function<const TensorQ *(Value *)> &params_of) {
    static const auto kDequantize = c10::Symbol::aten("dequantize");
    std::vector<Value *> values{x};
    if (x->node()->kind() == c10::Symbol::aten("cat")) {
        Node *list = x->node()->input(0)->node();
        const auto dim = torch::jit::toIValue(x->node()->input(1));
        if (list->kind() != c10::prim::ListConstruct || !dim || !dim->isInt() || dim->toInt() != 1) return {};
        values.assign(list->inputs().begin(), list->inputs().end());
    }
    std::vector<Value *> parts;
    for (Value *v : values) {
        if (v->node()->kind() != kDequantize || v->node()->inputs().size() != 1 || !params_of(v->node()->input(0)))
            return {};
        parts.push_back(v->node()->input(0));
    }
    return parts;
}

// weight / sqrt(var + eps) and bias - mean * that, when every argument is a constant.
bool norm_scale_shift(const Node *bn, at::Tensor *scale, at::Tensor *shift) {
    std::vector<c10::optional<c10::IValue>> args;
    for (size_t i = 1; i < bn->inputs().size(); ++i) args.push_back(torch::jit::toIValue(bn->input(i)));
    for (const auto &a : args)
        if (!a) return false;
    // weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled
    if (!args[2]->isTensor() || !args[3]->isTensor() || !args[4]->isBool() || args[4]->toBool() || !args[6]->isDouble())
        return false;
    const at::Tensor mean = args[2]->toTensor().to(at::kDouble), var = args[3]->toTensor().to(at::kDouble);
    if (mean.dim() != 1 || var.sizes() != mean.sizes()) return false;
    at::Tensor a = 1.0 / at::sqrt(var + args[6]->toDouble());
    if (args[0]->isTensor()) a = a * args[0]->toTensor().to(at::kDouble);
    at::Tensor b = -mean * a;
    if (args[1]->isTensor()) b = b + args[1]->toTensor().to(at::kDouble);
    if (a.sizes() != mean.sizes() || b.sizes() != mean.sizes()) return false;
    *scale = a.to(at::kFloat).contiguous();
    *shift = b.to(at::kFloat).contiguous();
    return true;
}

// The constant ints of a list, also when it is built from constants by a ListConstruct.
std::optional<std::vector<int64_t>> int_list(Value *v) {
    if (auto list = passes::constant_int_list(v)) return list;
    if (v->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
    std::vector<int64_t> ints;
    for (Value *item : v->node()->inputs()) {
        const auto i = passes::constant_int(item);
        if (!i) return std::nullopt;
        ints.push_back(*i);
    }
    return ints;
}

// The dims and keepdim of a mean over two dims that `user` takes of its first input.
bool mean_of_two_dims(Node *user, std::vector<int64_t> *dim, bool *keepdim) {
    if (user->kind() == c10::Symbol::aten("adaptive_avg_pool2d") && user->inputs().size() == 2) {
        const auto size = int_list(user->input(1));
        if (!size || *size != std::vector<int64_t>{1, 1}) return false;
        *dim = {-2, -1};
        *keepdim = true;
        return true;
    }
    if (user->kind() != c10::Symbol::aten("mean") || user->inputs().size() != 4 ||
        !passes::is_constant_none(user->input(3)))
        return false;
    const auto dims = int_list(user->input(1));
    const auto keep = passes::constant_bool(user->input(2));
    if (!dims || dims->size() != 2 || !keep) return false;
    *dim = *dims;
    *keepdim = *keep;
    return true;
}

}  // namespace

GateCounts fuse_int8_gates(Graph &graph, const std::function<const TensorQ *(Value *)> &params_of) {
    GateCounts counts;
    static const auto kMap = c10::Symbol::fromQualString("ipex::int8_map");
    static const auto kDequantize = c10::Symbol::aten("dequantize");
    static const auto kMul = c10::Symbol::aten("mul");
    const std::vector<Node *> sources = passes::collect_nodes_of_kind(graph.block(), {kMap, kDequantize});
    std::set<Node *> written;  // an in-place op writes the int8 value or the mapped one: the readers stay
    {
        torch::jit::AliasDb aliases(std::shared_ptr<Graph>(&graph, [](Graph *) {}));
        for (Node *src : sources)
            if (aliases.hasWriters(src->input(0)) || aliases.hasWriters(src->output())) written.insert(src);
    }
    for (Node *src : sources) {
        if (written.count(src)) continue;
        Value *x = src->input(0);
        Value *table = nullptr;
        if (src->kind() == kMap) {
            if (!passes::constant_tensor(src->input(1))) continue;
            table = src->input(1);
        } else {
            const TensorQ *q = src->inputs().size() == 1 ? params_of(x) : nullptr;
            if (!q) continue;
            torch::jit::WithInsertPoint guard(src);
            table = graph.insertConstant(dequantized_bytes(*q));
        }
        const std::vector<torch::jit::Use> uses = src->output()->uses();
        for (const auto &use : uses) {
            Node *user = use.user;
            std::vector<int64_t> dim;
            bool keepdim = false;
            double scale = 0;
            int64_t zero_point = 0, dtype = 0;
            torch::jit::WithInsertPoint guard(user);
            if (use.offset == 0 && mean_of_two_dims(user, &dim, &keepdim)) {
                Value *mean =
                    graph.insert(c10::Symbol::fromQualString("ipex::int8_map_mean"), {x, table, dim, keepdim});
                mean->setType(user->output()->type());
                user->output()->replaceAllUsesWith(mean);
                user->destroy();
                ++counts.means;
            } else if (user->kind() == kMul && user->inputs().size() == 2 &&
                       user->input(1 - use.offset) != src->output() &&
                       user->input(1 - use.offset)->type()->isSubtypeOf(*c10::TensorType::get()) &&
                       only_quantized(user->output(), &scale, &zero_point, &dtype)) {
                Value *gated = graph.insert(c10::Symbol::fromQualString("ipex::int8_map_gate"),
                                            {x, table, user->input(1 - use.offset), scale, zero_point, dtype});
                replace_quantizes(user->output(), gated);
                user->destroy();
                ++counts.products;
            }
        }
        if (!src->output()->hasUses()) src->destroy();
    }
    return counts;
}

int fuse_int8_cat_norms(Graph &graph, const std::function<const TensorQ *(Value *)> &params_of) {
    int count = 0;
    static const std::vector<c10::Symbol> kinds = {c10::Symbol::aten("batch_norm")};
    for (Node *bn : passes::collect_nodes_of_kind(graph.block(), kinds)) {
        if (bn->inputs().size() != 9) continue;
        const std::vector<Value *> parts = dequantized_parts(bn->input(0), params_of);
        at::Tensor scale, shift;
        if (parts.empty() || !norm_scale_shift(bn, &scale, &shift)) continue;
        Value *end = bn->output();
        Node *relu = nullptr;
        if (end->uses().size() == 1) {
            Node *user = end->uses()[0].user;
            if (user->kind() == c10::Symbol::aten("relu") || user->kind() == c10::Symbol::aten("relu_")) {
                relu = user;
                end = user->output();
            }
        }
        double out_scale = 0;
        int64_t zero_point = 0, dtype = 0;
        if (!only_quantized(end, &out_scale, &zero_point, &dtype)) continue;
        torch::jit::WithInsertPoint guard(bn);
        Value *list = graph.insertNode(graph.createList(c10::TensorType::get(), parts))->output();
        Value *fused = graph.insert(c10::Symbol::fromQualString("ipex::int8_cat_scale_shift"),
                                    {list, graph.insertConstant(scale), graph.insertConstant(shift), relu != nullptr,
                                     out_scale, zero_point, dtype});
        replace_quantizes(end, fused);
        if (relu) relu->destroy();
        bn->destroy();  // the cat and the dequantizes go with dead code when nothing else reads them
        ++count;
    }
    return count;
}

MapCounts map_elementwise_chains(Graph &graph, const std::function<const TensorQ *(Value *)> &params_of) {
    MapCounts counts;
    static const std::vector<c10::Symbol> kinds = {c10::Symbol::aten("dequantize")};
    for (Node *dq : passes::collect_nodes_of_kind(graph.block(), kinds)) {
        if (dq->inputs().size() != 1) continue;
        const TensorQ *q = params_of(dq->input(0));
        const std::vector<Node *> chain = chain_after(dq->output());
        if (!q || chain.empty()) continue;
        Value *end = chain.back()->output();
        at::Tensor table;
        try {
            table = run_chain(chain, dequantized_bytes(*q)).contiguous();
        } catch (const c10::Error &) {
            continue;  // an argument the op refuses: the model keeps the chain and fails as it would
        }
        if (table.scalar_type() != at::kFloat || table.sizes() != at::IntArrayRef{256}) continue;
        torch::jit::WithInsertPoint guard(dq);
        double scale = 0;
        int64_t zero_point = 0, dtype = 0;
        if (only_quantized(end, &scale, &zero_point, &dtype)) {
            Value *bytes = graph.insertConstant(quantized_bytes(table, scale, zero_point, dtype));
            Value *mapped = graph.insert(c10::Symbol::fromQualString("ipex::int8_requantize_map"),
                                         {dq->input(0), bytes, scale, zero_point, dtype});
            replace_quantizes(end, mapped);
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
