#include "passes/cast_to_lowp.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include "base/errors.h"
#include "ir/graph_utils.h"
#include "passes/lowp_caster.h"

namespace ipex::passes {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

std::optional<bool> conv_is_transposed(const Node *node) {
    const std::string kind = node->kind().toUnqualString();
    if (kind.rfind("conv_transpose", 0) == 0) return true;
    if (kind == "conv1d" || kind == "conv2d" || kind == "conv3d") return false;
    return constant_bool(input_named(node, "transposed"));
}

}  // namespace

LowpCaster::LowpCaster(std::shared_ptr<torch::jit::Graph> graph, at::ScalarType lowp)
    : graph_(std::move(graph)),
      lowp_(lowp),
      conv_transpose_ok_(lowp_conv_transpose_ok(lowp)),
      embedding_bag_ok_(lowp_embedding_bag_ok(lowp)),
      batch_norm_mixed_ok_(lowp_batch_norm_mixed_ok(lowp)) {}

PassResult LowpCaster::take_result() { return std::move(result_); }

// ---- walking -----------------------------------------------------------------------------

bool LowpCaster::has_candidates() {
    bool any = false;
    for (Node *node : collect_nodes(graph_->block())) {
        bool candidate = false;
        if (!node->maybeSchema()) continue;
        const LowpOpInfo *info = effective_info(node, &candidate);
        if (info) note_if_kept_fp32(node, info);
        any |= candidate;
    }
    return any;
}

void LowpCaster::note_if_kept_fp32(Node *node, const LowpOpInfo *info) {
    const LowpOpInfo *table_info = lowp_op_info(node->kind());
    if (table_info && table_info->category == LowpCategory::lowp && info->category == LowpCategory::fp32) {
        const std::string note = node_label(node) + ": " + node->kind().toQualString() + " has no working " +
                                 dtype_text(lowp_) + " CPU kernel in this libtorch; kept in fp32";
        if (noted_.insert(note).second) result_.skipped.push_back(note);
    }
}

void LowpCaster::run(bool keep_dtype_outputs) {
    alias_db_ = std::make_unique<torch::jit::AliasDb>(graph_, /*isFrozen=*/true);
    for (Value *input : graph_->inputs()) original_values_.insert(input);
    for (Node *node : collect_nodes(graph_->block())) {
        for (size_t i = 0; i < node->inputs().size(); ++i)
            if (writes_argument(node, i) && is_tensor_list(node->input(i)->type())) mutated_lists_.push_back(node->input(i));
        for (Value *output : node->outputs()) original_values_.insert(output);
        for (Block *block : node->blocks())
            for (Value *param : block->inputs()) original_values_.insert(param);
    }
    // Graph inputs: a declared floating dtype may also arrive in the low dtype.
    for (Value *input : graph_->inputs()) {
        const auto type = input->type()->cast<c10::TensorType>();
        if (!type || !type->scalarType()) continue;
        const at::ScalarType declared = *type->scalarType();
        sets_[input] = c10::isFloatingType(declared) ? DtypeSet::of(at::kFloat) | DtypeSet::of(lowp_)
                                                     : DtypeSet::of(declared);
    }
    process_block(graph_->block());
    narrow_softmax();
    if (!keep_dtype_outputs) restore_outputs();
    alias_db_.reset();
    torch::jit::EliminateDeadCode(graph_);
    torch::jit::EliminateCommonSubexpression(graph_);
    result_.changed = true;
}

void LowpCaster::process_block(Block *block) {
    const std::vector<Node *> nodes(block->nodes().begin(), block->nodes().end());
    for (Node *node : nodes) process_node(node);
}

void LowpCaster::process_node(Node *node) {
    switch (node->kind()) {
    case c10::prim::Constant:
        return;
    case c10::prim::If: {
        for (Block *block : node->blocks()) process_block(block);
        for (size_t i = 0; i < node->outputs().size(); ++i) {
            Value *output = node->output(i);
            DtypeSet set;
            for (Block *block : node->blocks()) {
                Value *returned = block->outputs()[i];
                set = set | (is_tensor_list(output->type()) ? list_elements(returned) : set_of(returned));
            }
            if (is_tensor_like(output->type())) sets_[output] = set;
            if (is_tensor_list(output->type()) && is_fixed_list(output)) list_sets_[output] = set;
            if (output->type()->cast<c10::TupleType>()) merge_tuple_sets(node, i);
        }
        return;
    }
    case c10::prim::Loop:
        // Loop-carried values may change dtype between iterations: they stay unknown.
        for (Block *block : node->blocks()) process_block(block);
        return;
    case c10::prim::ListConstruct:
    case c10::prim::ListUnpack:
    case c10::prim::TupleConstruct:
    case c10::prim::TupleUnpack:
    case c10::prim::TupleIndex:
    case c10::prim::unchecked_cast:
        process_structural(node);
        return;
    default:
        break;
    }
    if (node->maybeSchema()) {
        process_op(node);
        return;
    }
    for (Block *block : node->blocks()) process_block(block);
}

void LowpCaster::merge_tuple_sets(Node *branch, size_t index) {
    std::vector<DtypeSet> merged;
    for (torch::jit::Block *block : branch->blocks()) {
        if (block->outputs()[index]->node()->kind() == c10::prim::Uninitialized) continue;
        const auto it = tuple_sets_.find(block->outputs()[index]);
        if (it == tuple_sets_.end()) return;
        if (merged.empty()) merged.resize(it->second.size());
        if (it->second.size() != merged.size()) return;
        for (size_t e = 0; e < merged.size(); ++e) merged[e] = merged[e] | it->second[e];
    }
    if (!merged.empty()) tuple_sets_[branch->output(index)] = merged;
}

void LowpCaster::process_structural(Node *node) {
    switch (node->kind()) {
    case c10::prim::ListConstruct: {
        if (!is_tensor_list(node->output()->type()) || !is_fixed_list(node->output())) return;
        DtypeSet set;
        for (Value *input : node->inputs()) set = set | set_of(input);
        list_sets_[node->output()] = set;
        return;
    }
    case c10::prim::ListUnpack:
        set_outputs(node, list_elements(node->input()));
        return;
    case c10::prim::TupleConstruct: {
        std::vector<DtypeSet> elements;
        for (Value *input : node->inputs()) elements.push_back(set_of(input));
        tuple_sets_[node->output()] = elements;
        return;
    }
    case c10::prim::TupleUnpack: {
        const auto it = tuple_sets_.find(node->input());
        if (it == tuple_sets_.end() || it->second.size() != node->outputs().size()) return;
        for (size_t i = 0; i < node->outputs().size(); ++i)
            if (is_tensor_like(node->output(i)->type())) sets_[node->output(i)] = it->second[i];
        return;
    }
    case c10::prim::TupleIndex: {
        const auto it = tuple_sets_.find(node->input(0));
        const auto index = constant_int(node->input(1));
        if (it == tuple_sets_.end() || !index || *index < 0 ||
            *index >= static_cast<int64_t>(it->second.size()))
            return;
        if (is_tensor_like(node->output()->type())) sets_[node->output()] = it->second[*index];
        return;
    }
    default:  // prim::unchecked_cast
        if (is_tensor_like(node->output()->type())) sets_[node->output()] = set_of(node->input());
        if (is_tensor_list(node->output()->type()) && is_fixed_list(node->output()))
            list_sets_[node->output()] = list_elements(node->input());
        return;
    }
}

const LowpOpInfo *LowpCaster::effective_info(Node *node, bool *is_candidate) {
    static const LowpOpInfo kAnySame{LowpCategory::any, OutputRule::same};
    static const LowpOpInfo kAnyEmbeddingBag{LowpCategory::any, OutputRule::values_indices};
    static const LowpOpInfo kFp32Same{LowpCategory::fp32, OutputRule::same};
    static const LowpOpInfo kFp32EmbeddingBag{LowpCategory::fp32, OutputRule::values_indices};
    *is_candidate = false;
    const auto kind = node->kind();
    if (kind == c10::aten::pad) {
        // Constant padding has bf16 kernels; reflect/replicate padding has none in 1.13.
        const auto mode = torch::jit::toIValue(input_named(node, "mode"));
        const bool constant_mode = mode && mode->isString() && mode->toStringRef() == "constant";
        return constant_mode ? &kAnySame : nullptr;
    }
    if (kind == c10::aten::batch_norm && batch_norm_mixed_ok_) {
        // Inference batch norm (left where no convolution or linear took it in) runs on the
        // low-dtype activation that reaches it with its fp32 weights and statistics, instead of
        // casting the activation to fp32 and back around it.
        const auto training = constant_bool(input_named(node, "training"));
        if (training && !*training) return &kAnySame;
    }
    const LowpOpInfo *info = lowp_op_info(kind);
    if (!info || info->category != LowpCategory::lowp) return info;
    if (is_aten_conv(kind)) {
        const auto transposed = conv_is_transposed(node);
        if ((!transposed || *transposed) && !conv_transpose_ok_) return &kFp32Same;
    }
    const bool embedding = kind == c10::aten::embedding;
    const bool embedding_bag = kind == c10::aten::embedding_bag;
    if (embedding || embedding_bag) {
        const auto weight = constant_tensor(input_named(node, "weight"));
        if (embedding_bag && !embedding_bag_ok_) return &kFp32EmbeddingBag;
        if (!weight || !weight->is_floating_point()) return embedding ? &kAnySame : &kAnyEmbeddingBag;
    }
    *is_candidate = true;
    return info;
}

void LowpCaster::process_op(Node *node) {
    const auto kind = node->kind();
    if (kind == c10::aten::__getitem__) {
        if (node->input(0)->type()->cast<c10::ListType>()) set_outputs(node, list_elements(node->input(0)));
        return;
    }
    if (kind == c10::aten::list) {
        if (is_tensor_list(node->output()->type()) && is_fixed_list(node->output()))
            list_sets_[node->output()] = list_elements(node->input(0));
        return;
    }
    bool candidate = false;
    const LowpOpInfo *info = effective_info(node, &candidate);
    if (!info && kind.is_prim()) return;  // metadata and control ops: nothing to cast
    if (!info) {
        cast_inputs_fp32(node);
        compute_outputs(node, OutputRule::no_tensor);
        // With no low-precision input and no dtype argument an op cannot make one.
        if (!input_dtype_argument(node) && !may_see_lowp(node)) set_outputs(node, DtypeSet::any().without(lowp_));
        return;
    }
    note_if_kept_fp32(node, info);
    Value *dtype_arg = input_named(node, "dtype");
    const bool explicit_dtype = dtype_arg && !is_constant_none(dtype_arg);
    if (candidate) {
        cast_inputs_lowp(node);
    } else if (info->category == LowpCategory::fp32 && !explicit_dtype) {
        cast_inputs_fp32(node);
    }
    compute_outputs(node, info->rule);
}

void LowpCaster::cast_inputs_lowp(Node *node) {
    const auto kind = node->kind();
    const bool embedding = kind == c10::aten::embedding || kind == c10::aten::embedding_bag;
    const bool attention = kind == c10::Symbol::fromQualString("ipex::attention");
    const auto &args = node->schema().arguments();
    const size_t count = std::min(args.size(), node->inputs().size());
    bool must_be_floating = is_aten_conv(kind) || kind == c10::aten::linear;
    for (size_t i = 0; i < count; ++i) {
        const auto tensor = constant_tensor(node->input(i));
        must_be_floating |= tensor && tensor->is_floating_point();
    }
    for (size_t i = 0; i < count; ++i) {
        if (!is_tensor_like(node->input(i)->type()) || writes_argument(node, i)) continue;
        if (embedding && args[i].name() != "weight" && args[i].name() != "per_sample_weights") continue;
        if (attention && args[i].name() != "query" && args[i].name() != "key" && args[i].name() != "value") continue;
        Value *input = node->input(i);
        if (const auto tensor = constant_tensor(input)) {
            if (tensor->is_floating_point() && tensor->scalar_type() != lowp_)
                node->replaceInput(i, lowp_constant(input));
            continue;
        }
        if (!is_tensor(input->type())) continue;
        Value *cast_value = cast(input, lowp_, must_be_floating, node);
        if (cast_value != input) node->replaceInput(i, cast_value);
    }
    ++result_.count;
    const std::string label = node_label(node);
    if (modules_seen_.insert(label).second) result_.modules.push_back(label);
}

void LowpCaster::cast_inputs_fp32(Node *node) {
    const auto &args = node->schema().arguments();
    const size_t count = std::min(args.size(), node->inputs().size());
    // An in-place op cannot have its destination replaced: match the sources to it instead.
    Value *written_lowp = nullptr;
    for (size_t i = 0; i < count; ++i)
        if (is_tensor_like(node->input(i)->type()) && writes_argument(node, i) && set_of(node->input(i)).contains(lowp_))
            written_lowp = node->input(i);
    bool changed = false;
    for (size_t i = 0; i < count; ++i) {
        if (writes_argument(node, i)) continue;
        Value *input = node->input(i);
        if (is_tensor_list(input->type())) {
            cast_list_input(node, i);
            continue;
        }
        if (!is_tensor(input->type()) || constant_tensor(input)) continue;
        if (written_lowp) {
            // The destination's dtype is fixed; the op needs its value operands to match it
            // (they matched it in the original model). Indices and masks are left alone.
            const DtypeSet set = set_of(input);
            const DtypeSet destination = set_of(written_lowp);
            if (is_selector_argument(args[i].name()) || (set == destination && set.is_only(lowp_))) continue;
            torch::jit::WithInsertPoint guard(node);
            Node *match = graph_->insertNode(graph_->create(c10::aten::type_as, {input, written_lowp}));
            match->output()->setType(c10::TensorType::get());
            sets_[match->output()] = set_of(written_lowp);
            node->replaceInput(i, match->output());
            changed = true;
            continue;
        }
        Value *cast_value = cast(input, at::kFloat, false, node);
        if (cast_value != input) {
            node->replaceInput(i, cast_value);
            changed = true;
        }
    }
    if (changed && !lowp_op_info(node->kind())) {
        const std::string note = std::string(node->kind().toQualString()) + ": no " + dtype_text(lowp_) +
                                 " rule for this op; it runs in fp32 (in-place forms: in its destination's dtype)";
        if (noted_.insert(note).second) result_.skipped.push_back(note);
    }
}

void LowpCaster::cast_list_input(Node *node, size_t index) {
    Value *list = node->input(index);
    if (!list_elements(list).contains(lowp_)) return;
    Node *producer = list->node();
    if (producer->kind() != c10::prim::ListConstruct) {
        const std::string note = node_label(node) + ": a tensor list from " +
                                 producer->kind().toQualString() + " may hold " + dtype_text(lowp_) +
                                 " tensors; passed to " + node->kind().toQualString() + " as is";
        if (noted_.insert(note).second) result_.skipped.push_back(note);
        return;
    }
    std::vector<Value *> elements;
    bool changed = false;
    DtypeSet set;
    for (Value *element : producer->inputs()) {
        Value *cast_value = cast(element, at::kFloat, false, node);
        changed |= cast_value != element;
        elements.push_back(cast_value);
        set = set | set_of(cast_value);
    }
    if (!changed) return;
    const auto element_type = list->type()->expect<c10::ListType>()->getElementType();
    Node *fresh = graph_->createList(element_type, elements);
    fresh->insertBefore(node);
    fresh->copyMetadata(producer);
    list_sets_[fresh->output()] = set;
    node->replaceInput(index, fresh->output());
}

// ---- softmax between casts ---------------------------------------------------------------

namespace {

// Whether `node` is a plain `aten::to(x, dtype, false, false, None)` to `dtype`, as emit_cast
// writes it.
bool is_plain_cast_to(const Node *node, at::ScalarType dtype) {
    if (node->kind() != c10::aten::to || node->inputs().size() != 5) return false;
    const auto to = constant_int(node->input(1));
    return to && *to == static_cast<int64_t>(dtype) && constant_bool(node->input(2)) == false &&
           constant_bool(node->input(3)) == false && is_constant_none(node->input(4));
}

}  // namespace

// softmax is an fp32 op, so a bf16 score tensor (attention) is cast to fp32, normalized and
// cast back for the bf16 matmul that reads it. libtorch's bf16 CPU softmax already computes
// in fp32 and rounds once at the end, which is what the cast back does: where the input is
// surely bf16 and the only reader of the result is that cast back, softmax runs on the bf16
// input directly and writes bf16, with the same values and without two fp32 copies.
void LowpCaster::narrow_softmax() {
    if (lowp_ != at::kBFloat16) return;  // no fp16 softmax on CPU in this libtorch
    static const auto softmax = c10::Symbol::fromQualString("aten::softmax");
    for (Node *node : collect_nodes_of_kind(graph_->block(), {softmax})) {
        if (node->inputs().size() != 3 || !is_constant_none(node->input(2))) continue;
        const Node *to_fp32 = node->input(0)->node();
        if (!is_plain_cast_to(to_fp32, at::kFloat)) continue;
        Value *lowp_input = to_fp32->input(0);
        if (!set_of(lowp_input).is_only(lowp_)) continue;
        // Reading the bf16 value at the softmax must see what the cast saw.
        if (may_be_written(lowp_input) && to_fp32->next() != node) continue;
        const auto &uses = node->output()->uses();
        if (uses.size() != 1 || uses[0].offset != 0) continue;
        Node *back = uses[0].user;
        if (!is_plain_cast_to(back, lowp_)) continue;
        node->replaceInput(0, lowp_input);
        node->output()->setType(back->output()->type());
        sets_[node->output()] = DtypeSet::of(lowp_);
        back->output()->replaceAllUsesWith(node->output());
        back->destroy();
        ++result_.count;
        const std::string label = node_label(node);
        if (modules_seen_.insert(label).second) result_.modules.push_back(label);
    }
}

// ---- entry point -------------------------------------------------------------------------

PassResult cast_to_lowp(std::shared_ptr<torch::jit::Graph> &graph, at::ScalarType dtype,
                        bool keep_dtype_outputs) {
    if (dtype != at::kBFloat16 && dtype != at::kHalf)
        throw_unsupported(std::string("cast_to_lowp: ") + c10::toString(dtype) +
                          " is not a low-precision float type; use bf16 or fp16");
    std::string why;
    if (!lowp_dtype_runnable(dtype, &why))
        throw_unsupported("--dtype " + dtype_text(dtype) + ": this libtorch has no CPU " + dtype_text(dtype) +
                          " kernels for linear/convolution (" + why + "); use --dtype bf16 or fp32");
    LowpCaster caster(graph, dtype);
    if (!caster.has_candidates()) return caster.take_result();  // only the notes of what stays fp32
    caster.run(keep_dtype_outputs);
    return caster.take_result();
}

}  // namespace ipex::passes
