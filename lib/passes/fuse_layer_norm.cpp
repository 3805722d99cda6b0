#include "passes/fuse_layer_norm.h"

#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kLayerNorm = c10::Symbol::fromQualString("aten::layer_norm");
const c10::Symbol kIpexLayerNorm = c10::Symbol::fromQualString("ipex::layer_norm");
const c10::Symbol kIpexAddLayerNorm = c10::Symbol::fromQualString("ipex::add_layer_norm");

constexpr const char *kLayerNormSchema =
    "aten::layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
    "float eps=1e-05, bool cudnn_enable=True) -> Tensor";
constexpr const char *kAddSchema = "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";

// The add feeding `ln`, when it can be folded: alpha a constant number, both operands tensors.
Node *foldable_add(Node *ln) {
    Node *add = ln->input(0)->node();
    if (!add->matches(kAddSchema) || add->owningBlock() != ln->owningBlock()) return nullptr;
    if (!constant_double(add->input(2)) && !constant_int(add->input(2))) return nullptr;
    return add;
}

double alpha_of(Node *add) {
    if (const auto d = constant_double(add->input(2))) return *d;
    return static_cast<double>(*constant_int(add->input(2)));
}

// Whether every argument of `ln` but its input is defined before `point` (so a node there may
// take them).
bool arguments_defined_before(Node *ln, Node *point) {
    for (size_t i = 1; i < ln->inputs().size(); ++i) {
        Node *def = ln->input(i)->node();
        if (def->kind() == c10::prim::Param) continue;
        if (def->owningBlock() == point->owningBlock() ? !def->isBefore(point) : !point->isDominatedBy(def))
            return false;
    }
    return true;
}

}  // namespace

PassResult fuse_layer_norm(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    int with_add = 0, with_sum = 0;
    for (Node *ln : collect_nodes_of_kind(graph->block(), {kLayerNorm})) {
        const std::string label = node_label(ln);
        if (!ln->matches(kLayerNormSchema)) {
            result.skipped.push_back(label + ": unexpected aten::layer_norm signature");
            continue;
        }
        Node *add = foldable_add(ln);
        const bool sum_used_elsewhere = add && add->output()->uses().size() > 1;
        if (add && sum_used_elsewhere && !arguments_defined_before(ln, add)) {
            result.skipped.push_back(label + ": add kept apart (the layer norm's arguments are made after the sum "
                                             "is used)");
            add = nullptr;
        }
        Node *at = add && sum_used_elsewhere ? add : ln;
        torch::jit::WithInsertPoint guard(at);
        Value *other = add ? add->input(1) : graph->insertConstant(c10::IValue());
        Value *alpha = graph->insertConstant(add ? alpha_of(add) : 1.0);
        std::vector<Value *> inputs = {add ? add->input(0) : ln->input(0), other, alpha, ln->input(1), ln->input(2),
                                       ln->input(3), ln->input(4)};
        Node *fused = graph->create(sum_used_elsewhere && add ? kIpexAddLayerNorm : kIpexLayerNorm, inputs,
                                    sum_used_elsewhere && add ? 2 : 1);
        copy_origin(fused, ln);
        graph->insertNode(fused);
        const c10::TypePtr type = rank_only_type(ln->output()->type());
        for (Value *out : fused->outputs()) out->setType(type);
        ln->output()->replaceAllUsesWith(fused->outputs().back());
        ln->destroy();
        if (add && sum_used_elsewhere) {
            add->output()->replaceAllUsesWith(fused->output(0));
            ++with_sum;
        }
        if (add) {
            if (!add->hasUses()) add->destroy();
            ++with_add;
        }
        result.modules.push_back(label);
        ++result.count;
    }
    result.details = {{"with_add", with_add}, {"with_sum_output", with_sum}};
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
