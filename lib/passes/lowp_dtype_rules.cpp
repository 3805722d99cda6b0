// cast_to_lowp: which dtypes a value may have, and how op outputs follow from inputs.
#include <torch/csrc/jit/ir/constants.h>

#include "ir/graph_utils.h"
#include "passes/lowp_caster.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Python-number arguments that take part in type promotion.
bool is_promoting_scalar(const std::string &name) {
    return name == "self" || name == "other" || name == "exponent" || name == "min" || name == "max";
}

}  // namespace

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
    case OutputRule::promote_values:
        set = set_of(node->input(0));
        if (node->inputs().size() > 1 && is_tensor_like(node->input(1)->type()))
            set = set.promote(set_of(node->input(1)));
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

}  // namespace ipex::passes
