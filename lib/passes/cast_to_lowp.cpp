#include "passes/cast_to_lowp.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include "core/errors.h"
#include "passes/graph_utils.h"
#include "passes/lowp_caster.h"

namespace ipex::passes {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

bool is_tensor(const c10::TypePtr &type) { return type->kind() == c10::TypeKind::TensorType; }

bool is_tensor_like(const c10::TypePtr &type) {
    if (is_tensor(type)) return true;
    const auto optional = type->cast<c10::OptionalType>();
    return optional && is_tensor(optional->getElementType());
}

bool is_tensor_list(const c10::TypePtr &type) {
    const auto list = type->cast<c10::ListType>();
    return list && is_tensor_like(list->getElementType());
}

bool writes_argument(const Node *node, size_t index) {
    const auto *schema = node->maybeSchema();
    if (!schema || index >= schema->arguments().size()) return false;
    const auto *alias = schema->arguments()[index].alias_info();
    return alias && alias->isWrite();
}

// Arguments that select or index rather than carry values into the result.
bool is_selector_argument(const std::string &name) {
    return name == "condition" || name == "mask" || name == "index" || name == "indices" ||
           name == "offsets";
}

// Python-number arguments that take part in type promotion.
bool is_promoting_scalar(const std::string &name) {
    return name == "self" || name == "other" || name == "exponent" || name == "min" || name == "max";
}

std::optional<bool> conv_is_transposed(const Node *node) {
    const std::string kind = node->kind().toUnqualString();
    if (kind.rfind("conv_transpose", 0) == 0) return true;
    if (kind == "conv1d" || kind == "conv2d" || kind == "conv3d") return false;
    return constant_bool(input_named(node, "transposed"));
}

bool contains_tensor_type(const c10::TypePtr &type) {
    if (type->kind() == c10::TypeKind::TensorType) return true;
    for (const auto &inner : type->containedTypes())
        if (contains_tensor_type(inner)) return true;
    return false;
}

std::string dtype_text(at::ScalarType type) { return type == at::kBFloat16 ? "bf16" : "fp16"; }

}  // namespace

LowpCaster::LowpCaster(std::shared_ptr<torch::jit::Graph> graph, at::ScalarType lowp)
    : graph_(std::move(graph)),
      lowp_(lowp),
      conv_transpose_ok_(lowp_conv_transpose_ok(lowp)),
      embedding_bag_ok_(lowp_embedding_bag_ok(lowp)) {}

PassResult LowpCaster::take_result() { return std::move(result_); }

// ---- dtype sets --------------------------------------------------------------------------

DtypeSet LowpCaster::set_of(const Value *value) const {
    if (const auto tensor = constant_tensor(value)) return DtypeSet::of(tensor->scalar_type());
    if (value->node()->kind() == c10::prim::Uninitialized) return {};  // only on paths that raise
    if (value->type()->kind() == c10::TypeKind::NoneType) return {};
    if (const auto it = sets_.find(value); it != sets_.end()) return it->second;
    return is_tensor_like(value->type()) ? DtypeSet::any() : DtypeSet();
}

// Elements of a list built by ListConstruct and then only appended to, in one block, with
// every read after the last append (how TorchScript builds `xs = []; xs.append(..)`).
std::optional<DtypeSet> LowpCaster::appended_list_elements(const Value *list) const {
    const Node *construct = list->node();
    if (construct->kind() != c10::prim::ListConstruct || !is_tensor_list(list->type())) return std::nullopt;
    const Node *last_append = nullptr;
    DtypeSet set;
    for (const Value *input : construct->inputs()) set = set | set_of(input);
    for (const auto &use : list->uses()) {
        if (use.user->owningBlock() != construct->owningBlock()) return std::nullopt;
        if (use.user->kind() != c10::aten::append) continue;
        if (use.offset != 0) return std::nullopt;
        set = set | set_of(use.user->input(1));
        if (!last_append || last_append->isBefore(use.user)) last_append = use.user;
    }
    if (!last_append) return std::nullopt;
    for (const auto &use : list->uses()) {
        const auto kind = use.user->kind();
        if (kind == c10::aten::append) continue;
        if (use.user->isBefore(last_append)) return std::nullopt;
        if (kind == c10::prim::ListUnpack || kind == c10::aten::__getitem__ || kind == c10::aten::len) continue;
        const auto *schema = use.user->maybeSchema();
        if (!schema || use.offset >= schema->arguments().size() || schema->arguments()[use.offset].alias_info())
            return std::nullopt;
    }
    return set;
}

DtypeSet LowpCaster::list_elements(const Value *value) const {
    if (const auto it = list_sets_.find(value); it != list_sets_.end()) return it->second;
    if (value->node()->kind() == c10::prim::Uninitialized) return {};
    if (const auto appended = appended_list_elements(value)) return *appended;
    if (const auto ivalue = torch::jit::toIValue(value); ivalue && ivalue->isTensorList()) {
        DtypeSet set;
        for (const at::Tensor &t : ivalue->toTensorVector()) set = set | DtypeSet::of(t.scalar_type());
        return set;
    }
    return DtypeSet::any();
}

void LowpCaster::set_outputs(Node *node, const DtypeSet &set) {
    for (Value *output : node->outputs()) {
        if (is_tensor_like(output->type())) {
            sets_[output] = set;
        } else if (is_tensor_list(output->type()) && is_fixed_list(output)) {
            list_sets_[output] = set;
        }
    }
}

bool LowpCaster::is_fixed_list(const Value *list) const {
    // Elements are the ones the list was built with unless the list or an alias of it is
    // appended to, inserted into, assigned... (writes to the tensors inside do not matter:
    // they cannot change a dtype).
    if (!original_values_.count(list)) return true;
    for (const Value *mutated : mutated_lists_)
        if (alias_db_->mayAlias(list, mutated)) return false;
    return true;
}

bool LowpCaster::may_be_written(const Value *value) const {
    if (!original_values_.count(value)) return false;
    return alias_db_->hasWriters(value);
}

// ---- walking -----------------------------------------------------------------------------

bool LowpCaster::has_candidates() {
    for (Node *node : collect_nodes(graph_->block())) {
        bool candidate = false;
        if (node->maybeSchema()) effective_info(node, &candidate);
        if (candidate) return true;
    }
    return false;
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
    const LowpOpInfo *info = lowp_op_info(kind);
    if (!info || info->category != LowpCategory::lowp) return info;
    if (is_conv_kind(kind)) {
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
    const LowpOpInfo *table_info = lowp_op_info(kind);
    if (table_info && table_info->category == LowpCategory::lowp && info->category == LowpCategory::fp32) {
        const std::string note = node_label(node) + ": " + kind.toQualString() + " has no working " +
                                 dtype_text(lowp_) + " CPU kernel in this libtorch; kept in fp32";
        if (noted_.insert(note).second) result_.skipped.push_back(note);
    }
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
    const auto &args = node->schema().arguments();
    const size_t count = std::min(args.size(), node->inputs().size());
    bool must_be_floating = is_conv_kind(kind) || kind == c10::aten::linear;
    for (size_t i = 0; i < count; ++i) {
        const auto tensor = constant_tensor(node->input(i));
        must_be_floating |= tensor && tensor->is_floating_point();
    }
    for (size_t i = 0; i < count; ++i) {
        if (!is_tensor_like(node->input(i)->type()) || writes_argument(node, i)) continue;
        if (embedding && args[i].name() != "weight" && args[i].name() != "per_sample_weights") continue;
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
        if (is_tensor_list(node->input(i)->type())) {
            cast_list_input(node, i);
            continue;
        }
        if (!is_tensor_like(node->input(i)->type()) || !is_tensor(input->type()) || constant_tensor(input)) continue;
        if (written_lowp) {
            const DtypeSet set = set_of(input);
            if (!set.all_floating() || set == set_of(written_lowp)) continue;
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
                                 " rule for this op; its inputs are cast to fp32";
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

void LowpCaster::compute_outputs(Node *node, OutputRule rule) {
    if (Value *dtype = input_named(node, "dtype")) {
        if (const auto type = constant_int(dtype)) {
            set_outputs(node, DtypeSet::of(static_cast<at::ScalarType>(*type)));
            return;
        }
        if (!is_constant_none(dtype)) return;  // decided at run time
    }
    DtypeSet set;
    switch (rule) {
    case OutputRule::same:
        set = first_operand(node);
        break;
    case OutputRule::reduce: {
        // Integer and bool inputs accumulate in int64; floating ones keep their dtype.
        const DtypeSet input = first_operand(node);
        set = input & DtypeSet::floating();
        if (!input.subset_of(DtypeSet::floating())) set = set | DtypeSet::of(at::kLong);
        break;
    }
    case OutputRule::promote:
    case OutputRule::values_indices:
        set = promoted_operands(node);
        break;
    case OutputRule::boolean:
        set = DtypeSet::of(at::kBool);
        break;
    case OutputRule::indices:
        set = DtypeSet::of(at::kLong);
        break;
    case OutputRule::to:
        set = input_named(node, "other") ? set_of(input_named(node, "other")) : first_operand(node);
        break;
    case OutputRule::type_as:
        set = set_of(node->input(1));
        break;
    case OutputRule::no_tensor:
        return;
    }
    set_outputs(node, set);
    if (rule != OutputRule::values_indices) return;
    bool first = true;
    for (Value *output : node->outputs()) {
        if (!is_tensor_like(output->type())) continue;
        if (!first) sets_[output] = DtypeSet::of(at::kLong);
        first = false;
    }
}

bool LowpCaster::may_see_lowp(Node *node) const {
    for (Value *input : node->inputs()) {
        if (is_tensor_like(input->type()) && set_of(input).contains(lowp_)) return true;
        if (is_tensor_list(input->type()) && list_elements(input).contains(lowp_)) return true;
        if (!is_tensor_like(input->type()) && !is_tensor_list(input->type()) && contains_tensor_type(input->type()))
            return true;  // tuples, dicts...: not tracked
    }
    return false;
}

bool LowpCaster::input_dtype_argument(Node *node) const {
    for (const auto &arg : node->schema().arguments()) {
        const auto &type = arg.real_type();
        if (type->kind() == c10::TypeKind::ScalarTypeType) return true;
        const auto optional = type->cast<c10::OptionalType>();
        if (optional && optional->getElementType()->kind() == c10::TypeKind::ScalarTypeType) return true;
    }
    return false;
}

DtypeSet LowpCaster::first_operand(Node *node) const {
    const auto &args = node->schema().arguments();
    for (size_t i = 0; i < std::min(args.size(), node->inputs().size()); ++i) {
        if (is_tensor_like(node->input(i)->type())) return set_of(node->input(i));
        if (is_tensor_list(node->input(i)->type())) return list_elements(node->input(i));
    }
    return DtypeSet::any();
}

DtypeSet LowpCaster::promoted_operands(Node *node) const {
    const auto &args = node->schema().arguments();
    DtypeSet set;
    bool saw_tensor = false;
    std::vector<const Value *> scalars;
    for (size_t i = 0; i < std::min(args.size(), node->inputs().size()); ++i) {
        const auto &arg = args[i];
        if (is_selector_argument(arg.name())) continue;
        if (is_tensor_like(node->input(i)->type())) {
            set = set.promote(set_of(node->input(i)));
            saw_tensor = true;
        } else if (is_tensor_list(node->input(i)->type())) {
            set = set.promote(list_elements(node->input(i)));
            saw_tensor = true;
        } else if (is_promoting_scalar(arg.name())) {
            scalars.push_back(node->input(i));
        }
    }
    if (!saw_tensor || set.empty()) return DtypeSet::any();
    for (const Value *scalar : scalars) {
        const auto kind = scalar->type()->kind();
        if (kind == c10::TypeKind::FloatType) {
            set = set | set.promote_with_scalar(true);
        } else if (kind == c10::TypeKind::IntType || kind == c10::TypeKind::BoolType) {
            set = set | set.promote_with_scalar(false);
        } else if (kind == c10::TypeKind::NumberType) {
            set = set | set.promote_with_scalar(true) | set.promote_with_scalar(false);
        }
    }
    return set;
}

// ---- casts -------------------------------------------------------------------------------

torch::jit::Node *LowpCaster::insertion_point_after(Value *value) const {
    // Right after the producer (or at the start of the block for block inputs): the cast then
    // dominates every use and is shared by all of them.
    return value->node()->next();
}

Value *LowpCaster::cast(Value *value, at::ScalarType to, bool must_be_floating, Node *consumer) {
    const DtypeSet set = set_of(value);
    const at::ScalarType from = to == lowp_ ? at::kFloat : lowp_;
    if (to == lowp_ && (set & DtypeSet::floating()).without(lowp_).empty()) return value;
    if (to != lowp_ && !set.contains(lowp_)) return value;
    const DtypeSet plain = DtypeSet::of(at::kFloat) | DtypeSet::of(lowp_);
    const bool guarded = !(set.subset_of(plain) || (to == lowp_ && must_be_floating));
    const bool shared = !may_be_written(value);
    const auto key = std::make_tuple(static_cast<const Value *>(value), static_cast<int>(to), guarded);
    if (shared) {
        if (const auto it = cast_memo_.find(key); it != cast_memo_.end()) return it->second;
    }
    Value *out = emit_cast(value, to, guarded, shared ? insertion_point_after(value) : consumer);
    sets_[out] = guarded ? set.without(from) | DtypeSet::of(to) : DtypeSet::of(to);
    if (shared) cast_memo_[key] = out;
    return out;
}

Value *LowpCaster::emit_cast(Value *value, at::ScalarType to, bool guarded, Node *insert_before) {
    torch::jit::WithInsertPoint guard(insert_before);
    auto make_to = [&](Value *source) {
        Value *dtype = graph_->insertConstant(static_cast<int64_t>(to));
        Value *no = graph_->insertConstant(false);
        Value *none = graph_->insertConstant(c10::IValue());
        Node *node = graph_->insertNode(graph_->create(c10::aten::to, {source, dtype, no, no, none}));
        const auto type = source->type()->cast<c10::TensorType>();
        node->output()->setType(type ? type->withScalarType(to) : c10::TensorType::get());
        return node->output();
    };
    if (!guarded) return make_to(value);
    const at::ScalarType from = to == lowp_ ? at::kFloat : lowp_;
    Node *dtype = graph_->insertNode(graph_->create(c10::prim::dtype, {value}));
    dtype->output()->setType(c10::IntType::get());
    Value *expected = graph_->insertConstant(static_cast<int64_t>(from));
    Node *matches = graph_->insertNode(graph_->create(c10::aten::eq, {dtype->output(), expected}));
    matches->output()->setType(c10::BoolType::get());
    Node *branch = graph_->insertNode(graph_->create(c10::prim::If, {matches->output()}, 1));
    branch->output()->setType(c10::TensorType::get());
    Block *then_block = branch->addBlock();
    Block *else_block = branch->addBlock();
    {
        torch::jit::WithInsertPoint inside(then_block);
        then_block->registerOutput(make_to(value));
    }
    else_block->registerOutput(value);
    return branch->output();
}

Value *LowpCaster::lowp_constant(Value *constant) {
    if (const auto it = lowp_constants_.find(constant); it != lowp_constants_.end()) return it->second;
    const at::Tensor tensor = *constant_tensor(constant);
    Value *lowp = insert_constant_at_top(*graph_, tensor.to(lowp_), constant->node());
    if (constant->hasDebugName()) lowp->setDebugName(constant->debugName() + "_" + dtype_text(lowp_));
    lowp_constants_[constant] = lowp;
    return lowp;
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
    if (!caster.has_candidates()) return {};
    caster.run(keep_dtype_outputs);
    return caster.take_result();
}

}  // namespace ipex::passes
