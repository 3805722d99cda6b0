#include "passes/decompose_transformer_layer.h"

#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/ir_emitter.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/jit.h>

#include <cmath>
#include <map>
#include <mutex>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// The fused ops written with plain ops. Placeholders, filled per variant: ACT (the feed-forward
// activation), MASK_PARAM / MASK_ARG / MASK_ADD (an additive float mask broadcastable to
// [batch, heads, query, key] scores, or nothing). Attention is softmax(q kᵀ · scale + mask) v
// with q, k, v as [batch, heads, length, head_dim]: the form the attention fusion recognises.
constexpr const char *kSource = R"(
def split_heads(x: Tensor, heads: int) -> Tensor:
    return x.view(x.size(0), x.size(1), heads, x.size(2) // heads).transpose(1, 2)

def attend(q: Tensor, k: Tensor, v: Tensor, scale: float MASK_PARAM) -> Tensor:
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    MASK_ADD
    context = torch.matmul(torch.softmax(scores, -1), v)
    return context.transpose(1, 2).flatten(2)

def attend_weights(q: Tensor, k: Tensor, v: Tensor, scale: float MASK_PARAM, average: bool) -> Tuple[Tensor, Tensor]:
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    MASK_ADD
    probs = torch.softmax(scores, -1)
    context = torch.matmul(probs, v).transpose(1, 2).flatten(2)
    if average:
        return context, probs.mean(1)
    return context, probs

def project_self(x: Tensor, heads: int, w: Tensor, b: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    qkv = torch.linear(x, w, b).view(x.size(0), x.size(1), 3, heads, x.size(2) // heads).permute(2, 0, 3, 1, 4)
    return qkv[0], qkv[1], qkv[2]

def project_cross(query: Tensor, key: Tensor, value: Tensor, e: int, heads: int, w: Tensor,
                  b: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    q = split_heads(torch.linear(query, w[0:e], b[0:e]), heads)
    k = split_heads(torch.linear(key, w[e:2 * e], b[e:2 * e]), heads)
    v = split_heads(torch.linear(value, w[2 * e:3 * e], b[2 * e:3 * e]), heads)
    return q, k, v

def self_attention(x: Tensor, heads: int, scale: float, qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor,
                   proj_bias: Tensor MASK_PARAM) -> Tensor:
    q, k, v = project_self(x, heads, qkv_weight, qkv_bias)
    return torch.linear(attend(q, k, v, scale MASK_ARG), proj_weight, proj_bias)

def feed_forward(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    return torch.linear(ACT(torch.linear(x, w1, b1)), w2, b2)

def post_norm(src: Tensor, heads: int, scale: float, qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor,
              proj_bias: Tensor, eps: float, norm_weight_1: Tensor, norm_bias_1: Tensor,
              norm_weight_2: Tensor, norm_bias_2: Tensor, ffn_weight_1: Tensor, ffn_bias_1: Tensor,
              ffn_weight_2: Tensor, ffn_bias_2: Tensor MASK_PARAM) -> Tensor:
    e = src.size(2)
    x = torch.layer_norm(src + self_attention(src, heads, scale, qkv_weight, qkv_bias, proj_weight, proj_bias MASK_ARG),
                         [e], norm_weight_1, norm_bias_1, eps)
    return torch.layer_norm(x + feed_forward(x, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2),
                            [e], norm_weight_2, norm_bias_2, eps)

def pre_norm(src: Tensor, heads: int, scale: float, qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor,
             proj_bias: Tensor, eps: float, norm_weight_1: Tensor, norm_bias_1: Tensor,
             norm_weight_2: Tensor, norm_bias_2: Tensor, ffn_weight_1: Tensor, ffn_bias_1: Tensor,
             ffn_weight_2: Tensor, ffn_bias_2: Tensor MASK_PARAM) -> Tensor:
    e = src.size(2)
    x = src + self_attention(torch.layer_norm(src, [e], norm_weight_1, norm_bias_1, eps), heads, scale, qkv_weight,
                             qkv_bias, proj_weight, proj_bias MASK_ARG)
    return x + feed_forward(torch.layer_norm(x, [e], norm_weight_2, norm_bias_2, eps), ffn_weight_1,
                            ffn_bias_1, ffn_weight_2, ffn_bias_2)

def mha_self(query: Tensor, key: Tensor, value: Tensor, e: int, heads: int, scale: float, w: Tensor, b: Tensor,
             proj_weight: Tensor, proj_bias: Tensor MASK_PARAM) -> Tensor:
    q, k, v = project_self(query, heads, w, b)
    return torch.linear(attend(q, k, v, scale MASK_ARG), proj_weight, proj_bias)

def mha_cross(query: Tensor, key: Tensor, value: Tensor, e: int, heads: int, scale: float, w: Tensor, b: Tensor,
              proj_weight: Tensor, proj_bias: Tensor MASK_PARAM) -> Tensor:
    q, k, v = project_cross(query, key, value, e, heads, w, b)
    return torch.linear(attend(q, k, v, scale MASK_ARG), proj_weight, proj_bias)

def mha_self_weights(query: Tensor, key: Tensor, value: Tensor, e: int, heads: int, scale: float, w: Tensor,
                     b: Tensor, proj_weight: Tensor, proj_bias: Tensor MASK_PARAM, average: bool) -> Tuple[Tensor, Tensor]:
    q, k, v = project_self(query, heads, w, b)
    context, probs = attend_weights(q, k, v, scale MASK_ARG, average)
    return torch.linear(context, proj_weight, proj_bias), probs

def mha_cross_weights(query: Tensor, key: Tensor, value: Tensor, e: int, heads: int, scale: float, w: Tensor,
                      b: Tensor, proj_weight: Tensor, proj_bias: Tensor MASK_PARAM, average: bool) -> Tuple[Tensor, Tensor]:
    q, k, v = project_cross(query, key, value, e, heads, w, b)
    context, probs = attend_weights(q, k, v, scale MASK_ARG, average)
    return torch.linear(context, proj_weight, proj_bias), probs

def additive_mask(mask: Tensor) -> Tensor:
    if mask.dim() == 2:
        mask = mask.view(mask.size(0), 1, 1, mask.size(1))
    return torch.zeros(mask.size(), dtype=6).masked_fill(mask != 0, float('-inf'))  # 6: float32

def unpad(y: Tensor, keep: Tensor, padding: float) -> Tensor:
    n = int(keep.sum(1).max())
    return y.masked_fill(torch.logical_not(keep).unsqueeze(-1), padding)[:, 0:n]
)";

void replace_all(std::string &text, const std::string &from, const std::string &to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
}

// The inlined graph of function `name` of the source with the given activation and mask
// (compiled once per variant).
std::shared_ptr<torch::jit::Graph> source_graph(const std::string &name, bool gelu, bool masked) {
    static std::mutex mutex;
    static std::map<std::tuple<std::string, bool, bool>, std::shared_ptr<torch::jit::Graph>> graphs;
    std::lock_guard<std::mutex> lock(mutex);
    auto &graph = graphs[{name, gelu, masked}];
    if (!graph) {
        std::string source = kSource;
        replace_all(source, "ACT(", gelu ? "torch.gelu(" : "torch.relu(");
        replace_all(source, "MASK_PARAM", masked ? ", mask: Tensor" : "");
        replace_all(source, "MASK_ARG", masked ? ", mask" : "");
        replace_all(source, "MASK_ADD", masked ? "scores = scores + mask" : "");
        auto unit = torch::jit::compile(source);
        graph = torch::jit::toGraphFunction(unit->get_function(name)).graph()->copy();
        torch::jit::Inline(*graph);
    }
    return graph;
}

// Inserts `name`'s graph before `anchor` (with its scope and source range, so reports and
// inspect still point at the user's module); a returned tuple comes back as its elements.
std::vector<Value *> insert_source(torch::jit::Graph &graph, Node *anchor, const std::string &name,
                                   const std::vector<Value *> &inputs, bool gelu = false, bool masked = false) {
    torch::jit::WithInsertPoint guard(anchor);
    Node *before = anchor->prev();
    std::vector<Value *> outputs = torch::jit::insertGraph(graph, *source_graph(name, gelu, masked), inputs);
    for (Node *n = before->next(); n != anchor; n = n->next()) copy_origin(n, anchor);
    if (outputs.size() == 1 && outputs[0]->node()->kind() == c10::prim::TupleConstruct) {
        const auto elements = outputs[0]->node()->inputs();
        return {elements.begin(), elements.end()};
    }
    return outputs;
}

std::optional<at::ScalarType> known_dtype(const Value *value) {
    const auto type = value->type()->cast<c10::TensorType>();
    if (!type || !type->scalarType()) return std::nullopt;
    return *type->scalarType();
}

// The additive float mask the plain attention adds to its scores, built before `anchor` from
// the fused op's mask as libtorch's kernel reads it: any nonzero element (true, or a float
// other than 0) masks; a 2-D mask is [batch, key] (key padding), a higher rank broadcasts over
// [batch, heads, query, key]. nullptr with `why` set for a mask known to be neither bool nor
// floating point.
Value *additive_mask(torch::jit::Graph &graph, Node *anchor, Value *mask, std::string &why) {
    const auto dtype = known_dtype(mask);
    if (dtype && *dtype != at::kBool && !at::isFloatingType(*dtype)) {
        why = "the mask is neither bool nor floating point";
        return nullptr;
    }
    return insert_source(graph, anchor, "additive_mask", {mask}).at(0);
}

// Whether `value` is (a chain of encoder layers on) a nested tensor.
bool from_nested(const Value *value) {
    for (const Node *n = value->node();; n = n->input(0)->node()) {
        if (n->kind() == c10::Symbol::fromQualString("aten::_nested_tensor_from_mask")) return true;
        if (n->kind() != c10::Symbol::fromQualString("aten::_transformer_encoder_layer_fwd")) return false;
    }
}

// Scripted nn.TransformerEncoder, nn.TransformerEncoderLayer and nn.MultiheadAttention decide
// at run time whether to take a fused fast path (these ops) or to compute the same result with
// plain ops. Each such op sits in a branch of its own prim::If. The condition of that If is
// the decision itself (the compiled early return also reads it as "returned already"), so
// every use of it becomes the constant that picks the other branch; constant propagation then
// leaves the plain path, whose linears the later passes reach. Returns the module paths whose
// fast path was taken out.
std::vector<std::string> take_out_fast_paths(std::shared_ptr<torch::jit::Graph> &graph) {
    static const std::vector<c10::Symbol> fast_paths = {
        c10::Symbol::fromQualString("aten::_transformer_encoder_layer_fwd"),
        c10::Symbol::fromQualString("aten::_native_multi_head_attention"),
        c10::Symbol::fromQualString("aten::_nested_tensor_from_mask"),
    };
    std::vector<std::string> labels;
    for (Node *op : collect_nodes_of_kind(graph->block(), fast_paths)) {
        Node *branch = op->owningBlock()->owningNode();
        if (!branch || branch->kind() != c10::prim::If || branch->blocks().size() != 2) continue;
        // Already decided (a constant, possibly one this loop set for another op): leave it.
        if (branch->input(0)->node()->kind() == c10::prim::Constant) continue;
        const bool in_then = op->owningBlock() == branch->blocks()[0];
        torch::jit::WithInsertPoint guard(graph->block()->nodes().front());
        branch->input(0)->replaceAllUsesWith(graph->insertConstant(!in_then));
        labels.push_back(node_label(op) + " (" + op->kind().toUnqualString() + " branch not taken)");
    }
    if (!labels.empty()) {
        torch::jit::ConstantPropagation(graph);
        torch::jit::EliminateDeadCode(graph);
    }
    return labels;
}

const c10::Symbol kEncoderLayer = c10::Symbol::fromQualString("aten::_transformer_encoder_layer_fwd");
const c10::Symbol kMultiHeadAttention = c10::Symbol::fromQualString("aten::_native_multi_head_attention");
const c10::Symbol kNestedFromMask = c10::Symbol::fromQualString("aten::_nested_tensor_from_mask");
const c10::Symbol kToPadded = c10::Symbol::fromQualString("aten::to_padded_tensor");

// nn.TransformerEncoder given a key-padding mask packs its input into a nested tensor, runs the
// fused layers on it and pads the result back (padded rows 0, length the longest sequence).
// The chain becomes the padded computation: the layers take the key-padding mask, the rows
// that were padding are set to the padding value and the length trimmed as to_padded_tensor
// does. Returns the chains rewritten; kept chains go to `skipped`.
int unnest_encoder(torch::jit::Graph &graph, std::vector<std::string> &modules, std::vector<std::string> &skipped) {
    int count = 0;
    for (Node *nested : collect_nodes_of_kind(graph.block(), {kNestedFromMask})) {
        if (nested->owningBlock() != graph.block() && nested->owningBlock()->owningNode()->kind() == c10::prim::If)
            continue;  // a scripted branch the fast-path removal has not decided
        std::vector<Node *> layers;
        Node *padded = nullptr;
        for (Value *current = nested->output();;) {
            if (current->uses().size() != 1) break;
            Node *user = current->uses()[0].user;
            if (user->kind() == kEncoderLayer && user->input(0) == current &&
                is_constant_none(input_named(user, "mask"))) {
                layers.push_back(user);
                current = user->output();
            } else if (user->kind() == kToPadded && is_constant_none(user->input(2))) {
                padded = user;
                break;
            } else {
                break;
            }
        }
        if (!padded) {
            skipped.push_back(node_label(nested) + ": nested-tensor encoder kept (its layers are not a plain chain "
                                                   "ending in to_padded_tensor without an output size)");
            continue;
        }
        Value *dense = nested->input(0);
        Value *keep = nested->input(1);
        Value *pad;
        {
            torch::jit::WithInsertPoint guard(nested);
            pad = graph.insert(c10::Symbol::fromQualString("aten::logical_not"), {keep});
            pad->setType(keep->type());
        }
        torch::jit::WithInsertPoint guard(nested);
        Value *key_padding_type = graph.insertConstant(static_cast<int64_t>(1));
        for (Node *layer : layers) {
            layer->replaceInput(*input_index(layer, "mask"), pad);
            layer->replaceInput(*input_index(layer, "mask_type"), key_padding_type);
            layer->output()->setType(rank_only_type(dense->type()));
        }
        const std::string label = node_label(layers.empty() ? padded : layers.front());
        nested->output()->replaceAllUsesWith(dense);
        const std::vector<Value *> out =
            insert_source(graph, padded, "unpad", {padded->input(0), keep, padded->input(1)});
        out.at(0)->setType(rank_only_type(dense->type()));
        padded->output()->replaceAllUsesWith(out.at(0));
        padded->destroy();
        nested->destroy();
        modules.push_back(label + " (nested tensor -> padding mask)");
        ++count;
    }
    return count;
}

// The heads and 1/sqrt(head_dim) of a fused op from its constant num_heads and weight.
bool heads_and_scale(Node *node, const char *heads_name, int64_t &heads, int64_t &embed, double &scale,
                     std::string &why) {
    const auto h = constant_int(input_named(node, heads_name));
    const auto weight = constant_tensor(input_named(node, "qkv_weight"));
    if (!h || *h <= 0 || !weight || weight->dim() != 2 || weight->size(0) != 3 * weight->size(1) ||
        weight->size(1) % *h != 0) {
        why = "the head count or the q/k/v weight is not a constant of the expected shape";
        return false;
    }
    heads = *h;
    embed = weight->size(1);
    scale = 1.0 / std::sqrt(static_cast<double>(embed / heads));
    return true;
}

bool decompose_layer(torch::jit::Graph &graph, Node *node, std::string &why) {
    const auto gelu = constant_bool(input_named(node, "use_gelu"));
    const auto norm_first = constant_bool(input_named(node, "norm_first"));
    int64_t heads = 0, embed = 0;
    double scale = 0;
    if (!gelu || !norm_first) {
        why = "use_gelu or norm_first is not a constant";
        return false;
    }
    // The fast path runs only on 3-D input (or nested tensors): a graph loaded from a file
    // knows no ranks, so only a known other rank or a nested input keeps the op.
    const auto rank = known_rank(node->input(0));
    if ((rank && *rank != 3) || from_nested(node->input(0))) {
        why = "the input is not 3-D or is a nested tensor";
        return false;
    }
    if (!heads_and_scale(node, "num_heads", heads, embed, scale, why)) return false;
    Value *mask = input_named(node, "mask");
    const bool masked = mask && !is_constant_none(mask);
    Value *additive = nullptr;
    if (masked && !(additive = additive_mask(graph, node, mask, why)))
        return false;
    std::vector<Value *> inputs{node->input(0), input_named(node, "num_heads")};
    {
        torch::jit::WithInsertPoint guard(node);
        inputs.push_back(graph.insertConstant(scale));
    }
    for (const char *name : {"qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "eps", "norm_weight_1",
                             "norm_bias_1", "norm_weight_2", "norm_bias_2", "ffn_weight_1", "ffn_bias_1",
                             "ffn_weight_2", "ffn_bias_2"})
        inputs.push_back(input_named(node, name));
    if (additive) inputs.push_back(additive);
    const auto outputs =
        insert_source(graph, node, *norm_first ? "pre_norm" : "post_norm", inputs, *gelu, additive != nullptr);
    // The layer keeps its input's shape: the next layer sees a known 3-D input.
    outputs.at(0)->setType(node->input(0)->type());
    node->output()->replaceAllUsesWith(outputs.at(0));
    node->destroy();
    return true;
}

bool decompose_attention(torch::jit::Graph &graph, Node *node, std::string &why) {
    Value *query = node->input(0), *key = node->input(1), *value = node->input(2);
    for (Value *v : {query, key, value})
        if (const auto rank = known_rank(v); (rank && *rank != 3) || from_nested(v)) {
            why = "query, key or value is not 3-D or is a nested tensor";
            return false;
        }
    int64_t heads = 0, embed = 0;
    double scale = 0;
    if (!heads_and_scale(node, "num_head", heads, embed, scale, why)) return false;
    const auto need_weights = constant_bool(input_named(node, "need_weights"));
    const auto average = constant_bool(input_named(node, "average_attn_weights"));
    if (!need_weights || !average) {
        why = "need_weights or average_attn_weights is not a constant";
        return false;
    }
    const bool weights_used = node->outputs().at(1)->hasUses();
    if (weights_used && !*need_weights) {
        why = "the empty attention weights of need_weights=False are used";
        return false;
    }
    Value *mask = input_named(node, "mask");
    Value *additive = nullptr;
    if (mask && !is_constant_none(mask) &&
        !(additive = additive_mask(graph, node, mask, why)))
        return false;
    const bool self = query == key && key == value;
    std::string name = self ? "mha_self" : "mha_cross";
    if (weights_used) name += "_weights";
    std::vector<Value *> inputs{query, key, value};
    {
        torch::jit::WithInsertPoint guard(node);
        inputs.push_back(graph.insertConstant(embed));
        inputs.push_back(graph.insertConstant(heads));
        inputs.push_back(graph.insertConstant(scale));
    }
    for (const char *arg : {"qkv_weight", "qkv_bias", "proj_weight", "proj_bias"})
        inputs.push_back(input_named(node, arg));
    if (additive) inputs.push_back(additive);
    if (weights_used) inputs.push_back(input_named(node, "average_attn_weights"));
    const auto outputs = insert_source(graph, node, name, inputs, false, additive != nullptr);
    outputs.at(0)->setType(query->type());
    node->outputs().at(0)->replaceAllUsesWith(outputs.at(0));
    if (weights_used) node->outputs().at(1)->replaceAllUsesWith(outputs.at(1));
    node->destroy();
    return true;
}

}  // namespace

PassResult decompose_transformer_layer(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    result.modules = take_out_fast_paths(graph);
    result.count = static_cast<int>(result.modules.size());
    result.count += unnest_encoder(*graph, result.modules, result.skipped);
    bool rewrote = false;
    for (Node *node : collect_nodes_of_kind(graph->block(), {kEncoderLayer, kMultiHeadAttention})) {
        const std::string label = node_label(node);
        const std::string kind = node->kind().toQualString();
        std::string why;
        const bool done = node->kind() == kEncoderLayer ? decompose_layer(*graph, node, why)
                                                        : decompose_attention(*graph, node, why);
        if (!done) {
            result.skipped.push_back(label + ": kept as " + kind + " (" + why + ")");
            continue;
        }
        result.modules.push_back(label + " (" + kind + ")");
        ++result.count;
        rewrote = true;
    }
    if (rewrote) {
        // Folds the weight slices of cross-attention and the averaging choice.
        torch::jit::ConstantPropagation(graph);
        torch::jit::EliminateDeadCode(graph);
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
