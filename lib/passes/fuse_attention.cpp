#include "passes/fuse_attention.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph_utils.h"
#include "passes/replace_matmul.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kSoftmax = c10::Symbol::fromQualString("aten::softmax");
const c10::Symbol kSoftmaxImpl = c10::Symbol::fromQualString("aten::_softmax");
const c10::Symbol kMatmul = c10::Symbol::fromQualString("aten::matmul");
const c10::Symbol kBmm = c10::Symbol::fromQualString("aten::bmm");
const c10::Symbol kBaddbmm = c10::Symbol::fromQualString("aten::baddbmm");
const c10::Symbol kMul = c10::Symbol::fromQualString("aten::mul");
const c10::Symbol kDiv = c10::Symbol::fromQualString("aten::div");
const c10::Symbol kAdd = c10::Symbol::fromQualString("aten::add");
const c10::Symbol kWhere = c10::Symbol::fromQualString("aten::where");
const c10::Symbol kMaskedFill = c10::Symbol::fromQualString("aten::masked_fill");
// In-place forms: taken when the value they write has no other use (a traced `s += bias`
// hands its output on; a scripted one keeps using the written value, which then has two uses).
const c10::Symbol kMulInPlace = c10::Symbol::fromQualString("aten::mul_");
const c10::Symbol kDivInPlace = c10::Symbol::fromQualString("aten::div_");
const c10::Symbol kAddInPlace = c10::Symbol::fromQualString("aten::add_");
const c10::Symbol kMaskedFillInPlace = c10::Symbol::fromQualString("aten::masked_fill_");

// The out-of-place kind of an in-place scores op, else the kind itself.
c10::Symbol plain_kind(const torch::jit::Node *n) {
    if (n->kind() == kMulInPlace) return kMul;
    if (n->kind() == kDivInPlace) return kDiv;
    if (n->kind() == kAddInPlace) return kAdd;
    if (n->kind() == kMaskedFillInPlace) return kMaskedFill;
    return n->kind();
}
const c10::Symbol kTo = c10::Symbol::fromQualString("aten::to");
const c10::Symbol kTypeAs = c10::Symbol::fromQualString("aten::type_as");
const c10::Symbol kTranspose = c10::Symbol::fromQualString("aten::transpose");
const c10::Symbol kPermute = c10::Symbol::fromQualString("aten::permute");
const c10::Symbol kAttention = c10::Symbol::fromQualString("ipex::attention");
constexpr int64_t kFloat32 = 6;  // at::ScalarType::Float

bool is_product(const Node *n) { return (n->kind() == kMatmul || n->kind() == kBmm) && n->inputs().size() == 2; }

bool is_tensor(const Value *v) { return v->type()->cast<c10::TensorType>() != nullptr; }

// A constant number, or a constant tensor holding one element, possibly cast
// (`mask_value.to(scores.dtype)`, type_as).
std::optional<double> constant_scalar(const Value *v) {
    if (const auto d = constant_double(v)) return d;
    if (const auto i = constant_int(v)) return static_cast<double>(*i);
    if (const auto t = constant_tensor(v))
        if (t->numel() == 1 && t->dim() == 0 && !t->is_complex()) return t->item<double>();
    const Node *n = v->node();
    if ((n->kind() == kTo || n->kind() == kTypeAs) && !n->inputs().empty()) return constant_scalar(n->input(0));
    return std::nullopt;
}

// Whether `user` is the only use of `v` that needs its values: other uses may read its dtype
// or shape (prim::dtype, size, the second operand of type_as), which die with the pattern.
bool only_use_besides_metadata(const Value *v, const Node *user) {
    for (const auto &use : v->uses()) {
        if (use.user == user) continue;
        if (is_shape_query(use.user) || (use.user->kind() == kTypeAs && use.offset == 1)) continue;
        return false;
    }
    return true;
}

// aten::to(x, float32, ...): the identity in an fp32 graph.
bool is_fp32_cast(const Node *n) {
    if (n->kind() != kTo) return false;
    const Value *dtype = input_named(n, "dtype");
    return dtype && constant_int(dtype) == kFloat32 && n->inputs().size() <= 5;
}

// A cast of the attention weights back to the dtype of the scores or the query before
// P @ V: to(P, float32), to(P, prim::dtype(x)) or type_as(P, x). The op's output has the
// query's dtype, which is what these produce in a graph before cast_to_lowp.
bool is_weights_cast(const Node *n) {
    if (n->kind() == kTypeAs) return true;
    if (n->kind() != kTo) return false;
    const Value *dtype = input_named(n, "dtype");
    return dtype && (constant_int(dtype) == kFloat32 || dtype->node()->kind() == c10::prim::dtype);
}

// Whether `v` comes from a product through the ops the pattern allows (used to tell the
// scores from the bias in an add).
bool leads_to_product(const Value *v) {
    for (int depth = 0; depth < 16; ++depth) {
        const Node *n = v->node();
        const c10::Symbol kind = plain_kind(n);
        if (is_product(n)) return true;
        if (kind == kWhere) {
            v = constant_scalar(n->input(2)) ? n->input(1) : n->input(2);
        } else if (kind == kMul || kind == kDiv || kind == kMaskedFill || is_fp32_cast(n)) {
            v = constant_scalar(n->input(0)) && kind == kMul ? n->input(1) : n->input(0);
        } else {
            return false;
        }
    }
    return false;
}

struct Match {
    Node *product = nullptr;  // Q @ Kt (or bias + Q @ Kt: baddbmm)
    Value *q = nullptr, *kt = nullptr;
    Node *out = nullptr;      // P @ V
    Value *bias = nullptr, *mask = nullptr;
    bool mask_keeps = false;
    double fill = 0.0, scale = 1.0;
};

// The attention around `softmax`, or nullopt with `why`.
std::optional<Match> match(Node *softmax, std::string &why) {
    Match m;
    // softmax(S, -1[, float32]) or _softmax(S, -1, false)
    const auto dim = constant_int(softmax->input(1));
    if (!dim) {
        why = "the softmax dim is not a constant";
        return std::nullopt;
    }
    if (softmax->kind() == kSoftmax && softmax->inputs().size() > 2 && !is_constant_none(softmax->input(2)) &&
        constant_int(softmax->input(2)) != kFloat32) {
        why = "softmax to a dtype other than float32";
        return std::nullopt;
    }
    if (softmax->kind() == kSoftmaxImpl && constant_bool(softmax->input(2)) != false) {
        why = "softmax with half_to_float";
        return std::nullopt;
    }
    // Down: the weights go to P @ V alone.
    Value *p = softmax->output();
    while (p->uses().size() == 1 && is_weights_cast(p->uses()[0].user) && p->uses()[0].offset == 0)
        p = p->uses()[0].user->output();
    // (the metadata reads the single-use checks allow are dropped with the pattern)
    if (p->uses().size() != 1 || !is_product(p->uses()[0].user) || p->uses()[0].offset != 0) {
        why = "the attention weights are used by more than a product with the values";
        return std::nullopt;
    }
    m.out = p->uses()[0].user;
    // Up: casts, bias, mask, scales, then Q @ Kt.
    Value *s = softmax->input(0);
    Node *user = softmax;
    bool bias_seen = false, mask_seen = false;
    double below = 1.0;  // scales met since the last bias or mask (walking up)
    for (;;) {
        Node *n = s->node();
        const c10::Symbol kind = plain_kind(n);
        if (!only_use_besides_metadata(s, user)) {
            why = "the scores are used elsewhere";
            return std::nullopt;
        }
        user = n;
        if (is_product(n)) {
            m.product = n;
            m.q = n->input(0);
            m.kt = n->input(1);
            break;
        }
        // baddbmm(bias, Q, Kt, beta=1, alpha=1): the scores with an additive bias (PyTorch's
        // multi-head attention adds attn_mask this way).
        if (n->kind() == kBaddbmm && n->inputs().size() == 5) {
            if (bias_seen || mask_seen || below != 1.0 || constant_scalar(n->input(3)) != 1.0 ||
                constant_scalar(n->input(4)) != 1.0 || !is_tensor(n->input(0))) {
                why = "a baddbmm that is not bias + Q @ Kt under the softmax";
                return std::nullopt;
            }
            m.product = n;
            m.bias = n->input(0);
            m.q = n->input(1);
            m.kt = n->input(2);
            break;
        }
        if (is_fp32_cast(n)) {
            s = n->input(0);
        } else if (kind == kMul || kind == kDiv) {
            const auto right = constant_scalar(n->input(1));
            const auto left = kind == kMul && n->kind() == kMul ? constant_scalar(n->input(0)) : std::nullopt;
            if (!right && !left) {
                why = std::string(n->kind().toQualString()) + " by a value that is not a constant number";
                return std::nullopt;
            }
            const double factor = right ? (kind == kDiv ? 1.0 / *right : *right) : *left;
            m.scale *= factor;
            below *= factor;
            s = right ? n->input(0) : n->input(1);
        } else if (kind == kAdd && !bias_seen && !mask_seen) {
            const Value *alpha = input_named(n, "alpha");
            if (!alpha || constant_scalar(alpha) != 1.0 || !is_tensor(n->input(0)) || !is_tensor(n->input(1))) {
                why = "an add that is not scores + tensor";
                return std::nullopt;
            }
            if (below != 1.0) {
                why = "the scores are scaled after the bias is added";
                return std::nullopt;
            }
            const bool first = n->kind() == kAddInPlace || leads_to_product(n->input(0));
            m.bias = n->input(first ? 1 : 0);
            s = n->input(first ? 0 : 1);
            bias_seen = true;
        } else if ((kind == kWhere || kind == kMaskedFill) && !mask_seen) {
            std::optional<double> fill;
            if (kind == kMaskedFill) {
                fill = constant_scalar(n->input(2));
                m.mask = n->input(1);
                s = n->input(0);
            } else if ((fill = constant_scalar(n->input(2)))) {
                m.mask_keeps = true;
                m.mask = n->input(0);
                s = n->input(1);
            } else if ((fill = constant_scalar(n->input(1)))) {
                m.mask = n->input(0);
                s = n->input(2);
            }
            if (!fill || !is_tensor(m.mask)) {
                why = "a mask whose fill value is not a constant number";
                return std::nullopt;
            }
            m.fill = *fill * below;  // scales applied after the mask also scale its fill
            below = 1.0;
            mask_seen = true;
        } else {
            why = std::string("the scores pass through ") + n->kind().toQualString();
            return std::nullopt;
        }
    }
    // The softmax runs over the scores' last dim: -1, or rank - 1 where the rank is known
    // (of the scores, else of the product's operands).
    if (*dim != -1) {
        auto rank = known_rank(softmax->input(0));
        const auto a = known_rank(m.q), b = known_rank(m.kt);
        if (!rank && a && b && *a >= 2 && *b >= 2) rank = std::max(*a, *b);
        if (!rank && (m.product->kind() == kBmm || m.product->kind() == kBaddbmm)) rank = 3;
        if (!rank || *dim != static_cast<int64_t>(*rank) - 1) {
            why = "softmax is not over the last dim";
            return std::nullopt;
        }
    }
    return m;
}

// K for Kt: the input of a transpose (or permute) of the last two dims, else Kt viewed
// transposed.
Value *key_of(torch::jit::Graph &graph, Value *kt, Node *origin) {
    const Node *n = kt->node();
    auto rank = known_rank(n->inputs().empty() ? kt : n->input(0));
    if (!rank && (origin->kind() == kBmm || origin->kind() == kBaddbmm)) rank = 3;
    auto last_two = [&](int64_t a, int64_t b) {
        if (a > b) std::swap(a, b);
        if (a == -2 && b == -1) return true;
        return rank && a == static_cast<int64_t>(*rank) - 2 && b == static_cast<int64_t>(*rank) - 1;
    };
    if (n->kind() == kTranspose && n->inputs().size() == 3) {
        const auto a = constant_int(n->input(1)), b = constant_int(n->input(2));
        if (a && b && last_two(*a, *b)) return n->input(0);
    }
    if (n->kind() == kPermute) {
        if (const auto perm = constant_int_list(n->input(1))) {
            const auto r = static_cast<int64_t>(perm->size());
            bool swap_last = r >= 2 && (*perm)[r - 2] == r - 1 && (*perm)[r - 1] == r - 2;
            for (int64_t i = 0; swap_last && i < r - 2; ++i) swap_last = (*perm)[i] == i;
            if (swap_last) return n->input(0);
        }
    }
    Node *t = graph.create(kTranspose, {kt, graph.insertConstant(-2), graph.insertConstant(-1)}, 1);
    copy_origin(t, origin);
    graph.insertNode(t);
    t->output()->setType(c10::TensorType::get());
    return t->output();
}

}  // namespace

PassResult fuse_attention(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    int masked = 0, biased = 0;
    // Attention written with einsum: its products as aten::matmul first.
    const PassResult einsums = einsum_to_matmul(graph);
    for (Node *softmax : collect_nodes_of_kind(graph->block(), {kSoftmax, kSoftmaxImpl})) {
        std::string why;
        const auto m = match(softmax, why);
        const std::string label = node_label(softmax);
        if (!m) {
            result.skipped.push_back(label + ": softmax kept (" + why + ")");
            continue;
        }
        if (m->product->owningBlock() != m->out->owningBlock() || softmax->owningBlock() != m->out->owningBlock()) {
            result.skipped.push_back(label + ": softmax kept (the pattern spans blocks)");
            continue;
        }
        torch::jit::WithInsertPoint guard(m->out);
        Value *key = key_of(*graph, m->kt, m->product);
        Value *none = graph->insertConstant(c10::IValue());
        Node *att = graph->create(kAttention,
                                  {m->q, key, m->out->input(1), m->bias ? m->bias : none,
                                   m->mask ? m->mask : none, graph->insertConstant(m->mask_keeps),
                                   graph->insertConstant(m->fill), graph->insertConstant(m->scale),
                                   graph->insertConstant(false)},
                                  1);
        copy_origin(att, m->out);
        graph->insertNode(att);
        att->output()->setType(rank_only_type(m->out->output()->type()));
        m->out->output()->replaceAllUsesWith(att->output());
        masked += m->mask != nullptr;
        biased += m->bias != nullptr;
        result.modules.push_back(label);
        ++result.count;
    }
    result.details = {{"with_mask", masked}, {"with_bias", biased}, {"einsum_products", einsums.count}};
    result.changed = result.count > 0 || einsums.changed;
    return result;
}

}  // namespace ipex::passes
