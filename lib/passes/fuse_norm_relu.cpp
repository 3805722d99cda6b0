#include "passes/fuse_norm_relu.h"

#include <vector>

#include "passes/bn_folding.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kIpexNormRelu = c10::Symbol::fromQualString("ipex::norm_relu");

constexpr const char *kBatchNormSchema =
    "aten::batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
    "bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor";

// The norm's scale and shift (read_batch_norm, fp64) in fp32, or fp64 for fp64 statistics.
std::optional<std::pair<at::Tensor, at::Tensor>> folded_norm(Node *bn, std::string *why) {
    const auto affine = read_batch_norm(bn, why);
    if (!affine) return std::nullopt;
    const auto mean = constant_tensor(bn->input(3));
    const at::ScalarType type = mean->scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    return std::make_pair(affine->scale.to(type).contiguous(), affine->shift.to(type).contiguous());
}

// The cat feeding `bn` along dim 1 whose list and result nothing else uses.
Node *foldable_cat(Node *bn) {
    Node *cat = bn->input(0)->node();
    if (!cat->matches(kAtenCatSchema) || cat->owningBlock() != bn->owningBlock()) return nullptr;
    if (constant_int(cat->input(1)) != std::optional<int64_t>(1) || cat->output()->uses().size() != 1) return nullptr;
    Node *list = cat->input(0)->node();
    if (list->kind() != c10::prim::ListConstruct || list->output()->uses().size() != 1) return nullptr;
    return cat;
}

// The ReLU that is the only use of `bn`'s result.
Node *foldable_relu(Node *bn) {
    const auto &uses = bn->output()->uses();
    if (uses.size() != 1) return nullptr;
    Node *user = uses[0].user;
    const bool relu = user->kind() == c10::aten::relu || user->kind() == c10::aten::relu_;
    return relu && user->inputs().size() == 1 && user->owningBlock() == bn->owningBlock() ? user : nullptr;
}

}  // namespace

PassResult fuse_norm_relu(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    int with_cat = 0, with_relu = 0;
    for (Node *bn : collect_nodes_of_kind(graph->block(), {c10::aten::batch_norm})) {
        const std::string label = node_label(bn);
        if (!bn->matches(kBatchNormSchema)) {
            result.skipped.push_back(label + ": unexpected aten::batch_norm signature");
            continue;
        }
        std::string why;
        const auto folded = folded_norm(bn, &why);
        if (!folded) {
            result.skipped.push_back(label + ": " + why);
            continue;
        }
        Node *cat = foldable_cat(bn);
        Node *relu = foldable_relu(bn);
        Node *last = relu ? relu : bn;
        Value *list = nullptr;
        {
            torch::jit::WithInsertPoint guard(bn);
            list = cat ? cat->input(0) : graph->insertNode(graph->createList(c10::TensorType::get(), {bn->input(0)}))->output();
        }
        Value *scale = insert_constant_at_top(*graph, folded->first, bn);
        Value *shift = insert_constant_at_top(*graph, folded->second, bn);
        Value *with = insert_constant_at_top(*graph, relu != nullptr, bn);
        Node *op = graph->create(kIpexNormRelu, {list, scale, shift, with}, 1);
        op->insertBefore(bn);
        op->output()->setType(last->output()->type());
        op->copyMetadata(bn);
        last->output()->replaceAllUsesWith(op->output());
        if (relu) relu->destroy();
        bn->destroy();
        if (cat) cat->destroy();
        result.modules.push_back(module_path(op));
        ++result.count;
        with_cat += cat != nullptr;
        with_relu += relu != nullptr;
    }
    result.changed = result.count > 0;
    result.details = {{"norm_relu", result.count}, {"with_cat", with_cat}, {"with_relu", with_relu}};
    return result;
}

}  // namespace ipex::passes
