#include "passes/fuse_norm_relu.h"

#include <vector>

#include "passes/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kIpexNormRelu = c10::Symbol::fromQualString("ipex::norm_relu");

constexpr const char *kBatchNormSchema =
    "aten::batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
    "bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor";
constexpr const char *kCatSchema = "aten::cat(Tensor[] tensors, int dim=0) -> Tensor";

// scale = weight / sqrt(running_var + eps), shift = bias - running_mean * scale (fp64, then
// fp32, fp64 for fp64 statistics); nothing when the statistics are not constants or the norm may train.
std::optional<std::pair<at::Tensor, at::Tensor>> folded_norm(Node *bn, std::string *why) {
    const auto training = constant_bool(bn->input(5));
    const auto eps = constant_double(bn->input(7));
    const auto mean = constant_tensor(bn->input(3)), var = constant_tensor(bn->input(4));
    if (!training || *training || !eps) {
        *why = "training or eps not a constant false / number";
        return std::nullopt;
    }
    if (!mean || !var || mean->dim() != 1 || var->sizes() != mean->sizes()) {
        *why = "running statistics not constant vectors";
        return std::nullopt;
    }
    const int64_t c = mean->numel();
    auto param = [&](const Value *v, double fill) -> std::optional<at::Tensor> {
        if (is_constant_none(v)) return at::full({c}, fill, at::kDouble);
        const auto t = constant_tensor(v);
        if (!t || t->sizes() != mean->sizes()) return std::nullopt;
        return t->to(at::kDouble);
    };
    const auto weight = param(bn->input(1), 1.0), bias = param(bn->input(2), 0.0);
    if (!weight || !bias) {
        *why = "weight or bias not a constant vector";
        return std::nullopt;
    }
    const at::Tensor scale = *weight / at::sqrt(var->to(at::kDouble) + *eps);
    const at::Tensor shift = *bias - mean->to(at::kDouble) * scale;
    const at::ScalarType type = mean->scalar_type() == at::kDouble ? at::kDouble : at::kFloat;  // fp64 models keep it
    return std::make_pair(scale.to(type).contiguous(), shift.to(type).contiguous());
}

// The cat feeding `bn` along dim 1 whose list and result nothing else uses.
Node *foldable_cat(Node *bn) {
    Node *cat = bn->input(0)->node();
    if (!cat->matches(kCatSchema) || cat->owningBlock() != bn->owningBlock()) return nullptr;
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
