#include "quant/convert_static.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "base/errors.h"
#include "base/log.h"
#include "ir/graph_utils.h"
#include "quant/elementwise_maps.h"
#include "ops/int8/int8_context.h"

namespace ipex::quant {
namespace {

using torch::jit::Node;
using torch::jit::Value;

c10::Symbol sym(const char *qualified) { return c10::Symbol::fromQualString(qualified); }

// Queries whose answer is the same for a tensor and its quantized form (not dtype ones).
bool is_size_query(const Node *node) {
    static const std::set<std::string> kinds = {"aten::size", "aten::dim", "aten::numel", "aten::len",
                                                "prim::shape"};
    return kinds.count(node->kind().toQualString()) > 0;
}

at::ScalarType torch_qtype(QDtype dtype) { return dtype == QDtype::s8 ? at::kQInt8 : at::kQUInt8; }

c10::IValue call_op(const char *name, const char *overload, torch::jit::Stack stack) {
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
    op.callBoxed(&stack);
    return stack.at(0);
}

// Ops that compute on int8 values as they are (stock kernels accept quantized tensors) and
// keep the input's quantization parameters.
bool is_passthrough(const Node *node) {
    static const std::set<std::string> kinds = {"aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d",
                                                "aten::adaptive_avg_pool2d", "aten::avg_pool2d",
                                                "aten::flatten", "aten::reshape", "aten::view", "aten::relu"};
    return kinds.count(node->kind().toQualString()) && node->outputs().size() == 1;
}

class StaticConverter {
public:
    StaticConverter(torch::jit::Graph &graph, const QConfig &config, bool ipex_ops)
        : g_(graph), config_(config), ipex_ops_(ipex_ops) {}

    // The quantization parameters an int8 value carries.
    const TensorQ &qparams(Value *qv) const { return qparams_.at(qv); }
    const TensorQ *find_qparams(Value *v) const {
        auto it = qparams_.find(v);
        return it != qparams_.end() && int8_.count(v) ? &it->second : nullptr;
    }

    // The int8 value for fp32 `v`: the one it was dequantized from when there is one (an
    // int8 producer keeps its own parameters), else a new quantize_per_tensor before `user`
    // (ipex::quantize_per_tensor with the ipex ops, aten's in a portable model).
    Value *quantized(Value *v, const TensorQ &q, Node *user) {
        v = current(v);
        if (v->node()->kind() == c10::Symbol::aten("dequantize")) {
            Value *src = v->node()->input(0);
            if (int8_.count(src)) return src;
        }
        // Ops reading one value with the same parameters (calibrate observes a value once)
        // share one quantize, placed before the first of them.
        const auto key = std::make_tuple(v, q.scale, q.zero_point, q.dtype);
        if (auto it = quantized_.find(key); it != quantized_.end()) return it->second;
        torch::jit::WithInsertPoint guard(user);
        // With the ipex ops, their vectorized quantize (channels-last for 4-D values).
        const c10::Symbol kind = ipex_ops_ ? c10::Symbol::fromQualString("ipex::quantize_per_tensor")
                                           : c10::Symbol::aten("quantize_per_tensor");
        Value *qv = g_.insert(kind, {v, q.scale, q.zero_point, static_cast<int64_t>(torch_qtype(q.dtype))});
        mark(qv, q);
        quantized_[key] = qv;
        return qv;
    }

    // Replaces fp32 `old` by dequantize(qv) for every remaining user.
    void publish(Value *old, Value *qv) {
        torch::jit::WithInsertPoint guard(qv->node()->next());
        Value *deq = g_.insert(c10::Symbol::aten("dequantize"), {qv});
        deq->setType(old->type());
        old->replaceAllUsesWith(deq);
        replaced_[old] = deq;
        // Size queries read the int8 value: no dequantize for them.
        const std::vector<torch::jit::Use> uses = deq->uses();
        for (const auto &use : uses)
            if (is_size_query(use.user)) use.user->replaceInput(use.offset, qv);
    }

    // What an fp32 value of the prepared graph is called now (publish replaces values).
    Value *current(Value *v) const {
        for (auto it = replaced_.find(v); it != replaced_.end(); it = replaced_.find(v)) v = it->second;
        return v;
    }

    // True when every user of int8 `qv` runs before `node` and none makes a view of it: the
    // fused op at `node` may then write its result over qv's memory.
    static bool last_use_before(Value *qv, Node *node) {
        static const std::set<std::string> views = {"aten::flatten", "aten::reshape", "aten::view",
                                                    "aten::transpose", "aten::permute", "aten::select",
                                                    "aten::slice", "aten::expand", "aten::squeeze",
                                                    "aten::unsqueeze", "aten::contiguous", "ipex::contiguous",
                                                    "ipex::contiguous_for_view"};
        if (passes::is_graph_output(qv)) return false;
        for (const auto &use : qv->uses()) {
            if (use.user->owningBlock() != node->owningBlock() || !use.user->isBefore(node)) return false;
            if (views.count(use.user->kind().toQualString()) || use.user->kind() == c10::prim::TupleConstruct ||
                use.user->kind() == c10::prim::ListConstruct)
                return false;
        }
        return true;
    }

    void mark(Value *qv, const TensorQ &q) {
        int8_.insert(qv);
        qparams_[qv] = q;
    }

    Int8Params ipex_params(const QuantOp &op, const TensorQ &in, const TensorQ &out, bool relu) const {
        Int8Params p;
        p.kind = op.kind == "matmul" ? "linear" : op.kind;
        p.stride = op.stride;
        p.padding = op.padding;
        p.dilation = op.dilation;
        p.groups = op.groups;
        p.in_dtype = torch_qtype(in.dtype);
        p.out_dtype = torch_qtype(out.dtype);
        p.in_scale = in.scale;
        p.in_zero_point = in.zero_point;
        p.out_scale = out.scale;
        p.out_zero_point = out.zero_point;
        p.relu = relu;
        return p;
    }

    // The int8 op takes the float op's source range and scope, so reports name the user's module.
    Value *insert_ipex_op(const QuantOp &op, const OpConfig &cfg, const Int8Params &p, Value *qx, Value *qother) {
        c10::optional<at::Tensor> bias;
        if (op.bias) bias = *op.bias;
        auto ctx = c10::make_intrusive<Int8Context>(op.weight, bias, cfg.weight.scales, p);
        Value *c = g_.insertConstant(c10::IValue(ctx));
        Value *qy = qother ? g_.insert(sym("ipex::int8_op_sum"), {qx, qother, c})
                           : g_.insert(sym("ipex::int8_op"), {qx, c});
        passes::copy_origin(qy->node(), op.node);
        qy->setType(c10::TensorType::get());
        return qy;
    }

    void convert_op(const QuantOp &op, const OpConfig &cfg, ConvertCounts &counts) {
        if (ipex_ops_ && op.add && cfg.add) {  // the whole chain becomes one op at the add
            pending_add_[op.add] = {&op, &cfg};
            counts.int8_ops++;
            counts.fused_relu += op.relu != nullptr;
            return;
        }
        if (ipex_ops_) {
            Value *qx = quantized(op.input, cfg.input, op.node);
            torch::jit::WithInsertPoint guard(op.node);
            Value *qy = insert_ipex_op(op, cfg, ipex_params(op, qparams(qx), cfg.output, op.relu != nullptr), qx,
                                       nullptr);
            mark(qy, cfg.output);
            publish(op.output(), qy);
            counts.int8_ops++;
            counts.fused_relu += op.relu != nullptr;
            if (op.relu) dead_.push_back(op.relu);
            dead_.push_back(op.node);
            return;
        }
        const c10::IValue packed = prepack_weight(op, cfg.weight.scales);
        Value *qx = quantized(op.input, cfg.input, op.node);
        torch::jit::WithInsertPoint guard(op.node);
        Value *w = g_.insertConstant(packed);
        const bool relu = op.relu != nullptr;
        std::string name = "quantized::" + std::string(op.kind == "matmul" ? "linear" : op.kind);
        if (relu) name += "_relu";
        Value *qy = g_.insert(sym(name.c_str()), {qx, w, cfg.output.scale, cfg.output.zero_point});
        qy->setType(c10::TensorType::get());
        mark(qy, cfg.output);
        Value *fp_out = op.output();
        publish(fp_out, qy);
        counts.int8_ops++;
        counts.fused_relu += relu;
        if (op.relu) dead_.push_back(op.relu);
        dead_.push_back(op.node);
        if (op.add && cfg.add) pending_add_[op.add] = {&op, &cfg};
    }

    void convert_add(Node *add, const QuantOp &op, const OpConfig &cfg, ConvertCounts &counts) {
        if (ipex_ops_) {
            const AddQ &a = *cfg.add;
            Value *qx = quantized(op.input, cfg.input, add);
            Value *qo = quantized(op.add_other, a.other, add);
            Int8Params p = ipex_params(op, qparams(qx), a.output, op.relu != nullptr);
            p.sum = true;
            p.other_dtype = torch_qtype(qparams(qo).dtype);
            p.other_scale = qparams(qo).scale;
            p.other_zero_point = qparams(qo).zero_point;
            p.sum_relu = op.add_relu && a.relu;
            p.sum_in_place = qo != qx && last_use_before(qo, add);
            torch::jit::WithInsertPoint guard(add);
            Value *qz = insert_ipex_op(op, cfg, p, qx, qo);
            mark(qz, a.output);
            publish(p.sum_relu ? op.add_relu->output() : add->output(), qz);
            if (p.sum_relu) dead_.push_back(op.add_relu);
            dead_.push_back(add);
            if (op.relu) dead_.push_back(op.relu);
            dead_.push_back(op.node);
            counts.fused_add++;
            return;
        }
        Value *other = current(op.add_other);
        Value *mine = add->input(0) == other ? add->input(1) : add->input(0);
        Value *qa = quantized(mine, cfg.output, add);
        Value *qb = quantized(op.add_other, cfg.add->other, add);
        const bool relu = op.add_relu && cfg.add->relu;
        const AddQ &a = *cfg.add;
        torch::jit::WithInsertPoint guard(add);
        Value *qz = g_.insert(sym(relu ? "quantized::add_relu" : "quantized::add"),
                              {qa, qb, a.output.scale, a.output.zero_point});
        qz->setType(c10::TensorType::get());
        mark(qz, a.output);
        publish(relu ? op.add_relu->output() : add->output(), qz);
        if (relu) dead_.push_back(op.add_relu);
        dead_.push_back(add);
        counts.fused_add++;
    }

    bool passthrough(Node *node) {
        Value *in = node->input(0);
        if (in->node()->kind() != c10::Symbol::aten("dequantize") || !int8_.count(in->node()->input(0)))
            return false;
        // With the ipex ops a 2-D max pooling runs ipex::int8_max_pool2d (int8_pool.h: aten's
        // quantized kernel is slow where the channels are not a multiple of 32), an adaptive
        // average pooling ipex::int8_adaptive_avg_pool2d (the global pool in its own loop).
        static const c10::Symbol kMaxPool2d = c10::Symbol::aten("max_pool2d");
        static const c10::Symbol kAdaptiveAvgPool2d = c10::Symbol::aten("adaptive_avg_pool2d");
        const char *own = nullptr;
        if (ipex_ops_ && node->kind() == kMaxPool2d && node->inputs().size() == 6) own = "ipex::int8_max_pool2d";
        if (ipex_ops_ && node->kind() == kAdaptiveAvgPool2d && node->inputs().size() == 2)
            own = "ipex::int8_adaptive_avg_pool2d";
        Node *copy = own ? g_.create(c10::Symbol::fromQualString(own), node->inputs())
                         : g_.createClone(node, [](Value *v) { return v; });
        copy->replaceInput(0, in->node()->input(0));
        copy->insertBefore(node);
        copy->output()->setType(c10::TensorType::get());
        mark(copy->output(), qparams(in->node()->input(0)));
        publish(node->output(), copy->output());
        dead_.push_back(node);
        return true;
    }

    std::unordered_map<Node *, std::pair<const QuantOp *, const OpConfig *>> pending_add_;
    std::vector<Node *> dead_;

private:
    torch::jit::Graph &g_;
    const QConfig &config_;
    bool ipex_ops_;
    std::set<Value *> int8_;
    std::unordered_map<Value *, TensorQ> qparams_;
    std::unordered_map<Value *, Value *> replaced_;
    std::map<std::tuple<Value *, double, int64_t, QDtype>, Value *> quantized_;
};

// The same grid on u8: q_s8 = q_u8 - 128, so scale * (q_s8 - zp) = scale * (q_u8 - (zp + 128)).
TensorQ as_u8(const TensorQ &t) {
    if (t.dtype == QDtype::u8) return t;
    TensorQ u = t;
    u.dtype = QDtype::u8;
    u.zero_point = t.zero_point + 128;
    return u;
}

// Stock quantized conv/linear (onednn engine) read quint8 activations only: s8 parameters
// become their u8 equivalent, value for value.
QConfig portable_config(const QConfig &config) {
    QConfig out = config;
    int moved = 0;
    for (auto &op : out.ops) {
        if (op.dtype != "int8") continue;
        for (TensorQ *t : {&op.input, &op.output}) {
            moved += t->dtype == QDtype::s8;
            *t = as_u8(*t);
        }
        if (op.add) {
            for (TensorQ *t : {&op.add->other, &op.add->output}) {
                moved += t->dtype == QDtype::s8;
                *t = as_u8(*t);
            }
        }
    }
    if (moved > 0)
        log::info("--portable: " + std::to_string(moved) + " s8 activation tensors run as u8 with zero point + 128 "
                  "(the same values; stock quantized conv/linear read quint8 only)");
    return out;
}

at::Tensor quantize_weight(const at::Tensor &weight, const std::vector<double> &scales) {
    const auto opts = at::TensorOptions().dtype(at::kDouble);
    const at::Tensor s = at::tensor(scales, opts);
    const at::Tensor zp = at::zeros({static_cast<int64_t>(scales.size())}, at::TensorOptions().dtype(at::kLong));
    return at::quantize_per_channel(weight.to(at::kFloat).contiguous(), s, zp, 0, at::kQInt8);
}

}  // namespace

c10::IValue prepack_weight(const QuantOp &op, const std::vector<double> &scales) {
    at::globalContext().setQEngine(at::QEngine::ONEDNN);
    // Stock quantized ops read u8 activations: on a CPU without VNNI their weights get 7 bits,
    // as ipex::int8_op's do (int8_weight_scale_factor), so oneDNN's 16-bit pair sums cannot
    // saturate; the packed weight carries its own scales.
    std::vector<double> kernel_scales = scales;
    const double factor = int8_weight_scale_factor(at::kQUInt8, op.kind, op.groups);
    for (double &s : kernel_scales) s *= factor;
    const at::Tensor qw = quantize_weight(op.weight, kernel_scales);
    c10::optional<at::Tensor> bias;
    if (op.bias) bias = op.bias->to(at::kFloat).contiguous();
    if (op.kind == "linear" || op.kind == "matmul") return call_op("quantized::linear_prepack", "", {qw, bias});
    const std::string name = "quantized::" + op.kind + "_prepack";
    return call_op(name.c_str(), "", {qw, bias, op.stride, op.padding, op.dilation, op.groups});
}

void run_op_in_bf16(torch::jit::Graph &graph, const QuantOp &op) {
    Node *node = op.node;
    torch::jit::WithInsertPoint guard(node);
    Value *x = graph.insert(c10::Symbol::aten("to"), {node->input(0), at::kBFloat16});
    node->replaceInput(0, x);
    const at::Tensor w = *passes::constant_tensor(node->input(1));
    node->replaceInput(1, graph.insertConstant(w.to(at::kBFloat16)));
    if (op.kind != "matmul" && op.bias) node->replaceInput(2, graph.insertConstant(op.bias->to(at::kBFloat16)));
    Value *y = node->output();
    torch::jit::WithInsertPoint after(node->next());
    Value *back = graph.insert(c10::Symbol::aten("to"), {y, at::kFloat});
    back->setType(y->type());
    y->replaceAllUsesAfterNodeWith(back->node(), back);
}

ConvertCounts convert_static(torch::jit::Graph &graph, const std::vector<QuantOp> &ops, const QConfig &config,
                               const std::string &dtype_of_unlisted, bool ipex_ops) {
    at::globalContext().setQEngine(at::QEngine::ONEDNN);
    ConvertCounts counts;
    const QConfig portable = ipex_ops ? QConfig{} : portable_config(config);
    const QConfig &used = ipex_ops ? config : portable;
    StaticConverter conv(graph, used, ipex_ops);
    std::unordered_map<Node *, const QuantOp *> by_node;
    for (const auto &op : ops) by_node[op.node] = &op;
    for (Node *node : passes::collect_nodes(graph.block())) {
        if (auto it = by_node.find(node); it != by_node.end()) {
            const QuantOp &op = *it->second;
            const OpConfig *cfg = used.find(op.id);
            const std::string dtype = cfg ? cfg->dtype : dtype_of_unlisted;
            if (dtype == "int8") {
                conv.convert_op(op, *cfg, counts);
            } else if (dtype == "bf16") {
                // With --mixed-dtype bf16 the pass after conversion runs it in bf16 (mixed_bf16.h).
                if (dtype_of_unlisted != "bf16") run_op_in_bf16(graph, op);
                counts.bf16_ops++;
            } else {
                counts.kept_fp32++;
                counts.fp32_nodes.push_back(op.node);
            }
        } else if (auto add = conv.pending_add_.find(node); add != conv.pending_add_.end()) {
            conv.convert_add(node, *add->second.first, *add->second.second, counts);
        } else if (is_passthrough(node)) {
            counts.int8_passthrough += conv.passthrough(node);
        }
    }
    for (Node *dead : conv.dead_)
        if (!dead->hasUses()) dead->destroy();
    torch::jit::EliminateDeadCode(graph.block());
    if (ipex_ops && dtype_of_unlisted == "fp32") {  // --mixed-dtype bf16 casts those values itself
        const auto params_of = [&](Value *v) { return conv.find_qparams(v); };
        counts.int8_cat_norms = fuse_int8_cat_norms(graph, params_of);
        torch::jit::EliminateDeadCode(graph.block());
        const MapCounts maps = map_elementwise_chains(graph, params_of);
        counts.int8_maps = maps.int8;
        counts.fp32_maps = maps.fp32;
        torch::jit::EliminateDeadCode(graph.block());
        const GateCounts gates = fuse_int8_gates(graph, params_of);
        counts.int8_gate_means = gates.means;
        counts.int8_gate_products = gates.products;
        torch::jit::EliminateDeadCode(graph.block());
    }
    return counts;
}

}  // namespace ipex::quant
