#include "passes/contiguous_before_view.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_set>

#include "ops/layout_op.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kIpexContiguous = c10::Symbol::fromQualString(ops::kContiguousOp);
const c10::Symbol kIpexContiguousForView = c10::Symbol::fromQualString(ops::kContiguousForViewOp);

// Ops whose output may be channels-last although the original's was not: convolutions (aten
// ones after to_channels_last, prepacked, int8), ipex::channel_shuffle(_chunk) and explicit
// channels-last conversions.
bool changes_layout(const Node *node) {
    const std::string ns = node->kind().ns().toUnqualString();
    const std::string name = node->kind().toUnqualString();
    if (ns == "ipex" || ns == "quantized")
        return name.find("conv") != std::string::npos || name.find("int8") != std::string::npos ||
               name.rfind("channel_shuffle", 0) == 0;
    if (ns != "aten") return false;
    if (is_aten_conv(node)) return true;
    const Value *format = input_named(node, "memory_format");
    const auto code = format ? constant_int(format) : std::nullopt;
    return code && (*code == static_cast<int64_t>(at::MemoryFormat::ChannelsLast) ||
                    *code == static_cast<int64_t>(at::MemoryFormat::ChannelsLast3d));
}

// Ops that return a new tensor in the standard layout whatever their input's layout.
bool resets_layout(const Node *node) {
    static const std::set<std::string> kinds = {"aten::linear", "aten::matmul", "aten::mm", "aten::bmm",
                                                "aten::addmm", "aten::baddbmm", "ipex::linear", "ipex::linear_binary",
                                                "ipex::woq_linear"};
    if (kinds.count(node->kind().toQualString()) || node->kind() == kIpexContiguous) return true;
    if (node->kind() != c10::aten::contiguous) return false;
    const Value *format = input_named(node, "memory_format");
    const auto code = format ? constant_int(format) : std::nullopt;
    return code && *code == static_cast<int64_t>(at::MemoryFormat::Contiguous);
}

// Values computed from a layout-changing op, through any ops but those that reset the layout,
// if/loop blocks included.
std::unordered_set<const Value *> maybe_channels_last(torch::jit::Graph &graph) {
    std::unordered_set<const Value *> marked;
    const auto mark = [&](const Value *v) { return marked.insert(v).second; };
    const std::vector<Node *> nodes = collect_nodes(graph.block());
    for (bool changed = true; changed;) {
        changed = false;
        for (const Node *node : nodes) {
            bool hit = changes_layout(node);
            if (!hit && resets_layout(node)) continue;
            for (const Value *in : node->inputs()) hit |= marked.count(in) > 0;
            for (const torch::jit::Block *block : node->blocks())
                for (const Value *out : block->outputs()) hit |= marked.count(out) > 0;
            if (!hit) continue;
            for (const Value *out : node->outputs()) changed |= mark(out);
            // Loop-carried values and block parameters follow the node's inputs.
            for (const torch::jit::Block *block : node->blocks())
                for (const Value *param : block->inputs())
                    if (param->type()->kind() == c10::TypeKind::TensorType) changed |= mark(param);
        }
    }
    return marked;
}

bool is_view(const Node *node) {
    if (node->kind() == c10::aten::view_as) return true;
    return node->kind() == c10::aten::view && node->inputs().size() == 2 &&
           node->input(1)->type()->kind() == c10::TypeKind::ListType;
}

}  // namespace

PassResult contiguous_before_view(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    const auto marked = maybe_channels_last(*graph);
    if (marked.empty()) return result;
    // A graph that runs ipex ops anyway takes ipex::contiguous_for_view (no copy where the
    // view works on the tensor's own strides, else the faster channels-last copy); a portable
    // one keeps to aten.
    const std::vector<Node *> nodes = collect_nodes(graph->block());
    const bool ipex_graph = std::any_of(nodes.begin(), nodes.end(), [](const Node *node) {
        return std::string(node->kind().ns().toUnqualString()) == "ipex";
    });
    for (Node *view : nodes) {
        if (!is_view(view) || !marked.count(view->input(0))) continue;
        Value *base = view->input(0);
        if (base->node()->kind() == kIpexContiguousForView) continue;  // covered by an earlier run
        torch::jit::WithInsertPoint guard(view);
        Node *contiguous = nullptr;
        if (ipex_graph) {
            Value *size = view->kind() == c10::aten::view_as
                              ? graph->insertNode(graph->create(c10::aten::size, {view->input(1)}))
                                    ->output()
                                    ->setType(c10::ListType::ofInts())
                              : view->input(1);
            contiguous = graph->insertNode(graph->create(kIpexContiguousForView, {base, size}));
        } else {
            contiguous = graph->insertNode(graph->create(c10::aten::contiguous, {base, graph->insertConstant(0)}));
        }
        contiguous->output()->setType(base->type());
        base->replaceAllUsesAfterNodeWith(contiguous, contiguous->output());
        result.modules.push_back(node_label(view));
        ++result.count;
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
