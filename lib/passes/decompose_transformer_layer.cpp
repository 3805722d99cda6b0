#include "passes/decompose_transformer_layer.h"

#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/ir_emitter.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/jit.h>

#include <map>
#include <mutex>

#include "passes/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// The layer written with plain ops; ACT is the feed-forward activation. Inputs follow the
// fused op's schema order (without embed_dim, use_gelu, norm_first, mask, mask_type).
constexpr const char *kLayerSource = R"(
def attention(x: Tensor, heads: int, qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor,
              proj_bias: Tensor) -> Tensor:
    b = x.size(0)
    n = x.size(1)
    e = x.size(2)
    head_dim = e // heads
    qkv = torch.linear(x, qkv_weight, qkv_bias).view(b, n, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    q = qkv[0]
    k = qkv[1]
    v = qkv[2]
    scores = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / (head_dim ** 0.5), -1)
    context = torch.matmul(scores, v).transpose(1, 2).reshape(b, n, e)
    return torch.linear(context, proj_weight, proj_bias)

def feed_forward(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    return torch.linear(ACT(torch.linear(x, w1, b1)), w2, b2)

def post_norm(src: Tensor, heads: int, qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor,
              proj_bias: Tensor, eps: float, norm_weight_1: Tensor, norm_bias_1: Tensor,
              norm_weight_2: Tensor, norm_bias_2: Tensor, ffn_weight_1: Tensor, ffn_bias_1: Tensor,
              ffn_weight_2: Tensor, ffn_bias_2: Tensor) -> Tensor:
    e = src.size(2)
    x = torch.layer_norm(src + attention(src, heads, qkv_weight, qkv_bias, proj_weight, proj_bias),
                         [e], norm_weight_1, norm_bias_1, eps)
    return torch.layer_norm(x + feed_forward(x, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2),
                            [e], norm_weight_2, norm_bias_2, eps)

def pre_norm(src: Tensor, heads: int, qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor,
             proj_bias: Tensor, eps: float, norm_weight_1: Tensor, norm_bias_1: Tensor,
             norm_weight_2: Tensor, norm_bias_2: Tensor, ffn_weight_1: Tensor, ffn_bias_1: Tensor,
             ffn_weight_2: Tensor, ffn_bias_2: Tensor) -> Tensor:
    e = src.size(2)
    x = src + attention(torch.layer_norm(src, [e], norm_weight_1, norm_bias_1, eps), heads, qkv_weight,
                        qkv_bias, proj_weight, proj_bias)
    return x + feed_forward(torch.layer_norm(x, [e], norm_weight_2, norm_bias_2, eps), ffn_weight_1,
                            ffn_bias_1, ffn_weight_2, ffn_bias_2)
)";

// The inlined graph of `post_norm` or `pre_norm` with GELU or ReLU (compiled once each).
std::shared_ptr<torch::jit::Graph> layer_graph(bool gelu, bool norm_first) {
    static std::mutex mutex;
    static std::map<std::pair<bool, bool>, std::shared_ptr<torch::jit::Graph>> graphs;
    std::lock_guard<std::mutex> lock(mutex);
    auto &graph = graphs[{gelu, norm_first}];
    if (!graph) {
        std::string source = kLayerSource;
        const std::string act = gelu ? "torch.gelu" : "torch.relu";
        source.replace(source.find("ACT("), 3, act);
        auto unit = torch::jit::compile(source);
        graph = torch::jit::toGraphFunction(unit->get_function(norm_first ? "pre_norm" : "post_norm")).graph()->copy();
        torch::jit::Inline(*graph);
    }
    return graph;
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

}  // namespace

PassResult decompose_transformer_layer(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    result.modules = take_out_fast_paths(graph);
    result.count = static_cast<int>(result.modules.size());
    static const auto fused = c10::Symbol::fromQualString("aten::_transformer_encoder_layer_fwd");
    for (Node *node : collect_nodes_of_kind(graph->block(), {fused})) {
        const std::string label = node_label(node);
        const auto gelu = constant_bool(input_named(node, "use_gelu"));
        const auto norm_first = constant_bool(input_named(node, "norm_first"));
        Value *mask = input_named(node, "mask");
        std::string why;
        if (!gelu || !norm_first) why = "use_gelu or norm_first is not a constant";
        else if (mask && !is_constant_none(mask)) why = "the layer has an attention mask";
        else if (known_rank(node->input(0)) != std::optional<size_t>(3)) why = "the input is not known to be 3-D";
        if (!why.empty()) {
            result.skipped.push_back(label + ": kept as aten::_transformer_encoder_layer_fwd (" + why + ")");
            continue;
        }
        std::vector<Value *> inputs{node->input(0)};
        for (const char *name : {"num_heads", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "eps",
                                 "norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2", "ffn_weight_1",
                                 "ffn_bias_1", "ffn_weight_2", "ffn_bias_2"})
            inputs.push_back(input_named(node, name));
        torch::jit::WithInsertPoint guard(node);
        Node *before = node->prev();
        const auto outputs = torch::jit::insertGraph(*graph, *layer_graph(*gelu, *norm_first), inputs);
        for (Node *n = before->next(); n != node; n = n->next()) {
            n->setScope(node->scope());
            if (node->callstack()) n->setCallStack(*node->callstack());
            n->setSourceRange(node->sourceRange());
        }
        // The layer keeps its input's shape: the next layer sees a known 3-D input.
        outputs.at(0)->setType(node->input(0)->type());
        node->output()->replaceAllUsesWith(outputs.at(0));
        node->destroy();
        result.modules.push_back(label);
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
