// cast_to_lowp: the casts it inserts, low-precision constants, and fp32 graph outputs (also
// inside tuples, lists and dicts).
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/jit.h>

#include <string>
#include <vector>

#include "ir/graph_utils.h"
#include "passes/lowp_caster.h"

namespace ipex::passes {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

bool is_named_tuple(const c10::TypePtr &type) {
    const auto tuple = type->cast<c10::TupleType>();
    return tuple && tuple->schema();
}

// Writes TorchScript helpers "restore_N(x: T) -> T" that cast low-precision tensors inside
// a value of type T back to fp32, leaving every other element as it is.
class RestoreScript {
public:
    // TorchScript compiled without Python has no torch.bfloat16: dtypes are their int codes.
    explicit RestoreScript(at::ScalarType lowp) : lowp_code_(std::to_string(static_cast<int>(lowp))) {}

    // Name of the helper for `type`, "" when the type holds no tensor or cannot be written.
    std::string helper_for(const c10::TypePtr &type) {
        if (!contains_tensor_type(type) || !writable(type)) return "";
        const std::string name = "restore_" + std::to_string(count_++);
        const std::string ann = type->annotation_str();
        std::string body;
        if (type->kind() == c10::TypeKind::TensorType) {
            body = "    if x.dtype == " + lowp_code_ + ":\n        return x.float()\n    return x\n";
        } else if (const auto optional = type->cast<c10::OptionalType>()) {
            const std::string inner = helper_for(optional->getElementType());
            body = "    if x is not None:\n        return " + inner + "(x)\n    return None\n";
        } else if (const auto list = type->cast<c10::ListType>()) {
            const std::string inner = helper_for(list->getElementType());
            body = "    out: " + ann + " = []\n    for e in x:\n        out.append(" + inner +
                   "(e))\n    return out\n";
        } else if (const auto dict = type->cast<c10::DictType>()) {
            const std::string inner = helper_for(dict->getValueType());
            body = "    out: " + ann + " = {}\n    for k, v in x.items():\n        out[k] = " + inner +
                   "(v)\n    return out\n";
        } else if (const auto tuple = type->cast<c10::TupleType>()) {
            std::string items;
            for (size_t i = 0; i < tuple->elements().size(); ++i) {
                const std::string inner = helper_for(tuple->elements()[i]);
                const std::string item = "x[" + std::to_string(i) + "]";
                items += (inner.empty() ? item : inner + "(" + item + ")") + ", ";
            }
            body = "    return (" + items + ")\n";
        }
        source_ += "def " + name + "(x: " + ann + ") -> " + ann + ":\n" + body + "\n";
        return name;
    }

    const std::string &source() const { return source_; }

private:
    static bool writable(const c10::TypePtr &type) {
        switch (type->kind()) {
        case c10::TypeKind::TensorType:
        case c10::TypeKind::IntType:
        case c10::TypeKind::FloatType:
        case c10::TypeKind::BoolType:
        case c10::TypeKind::StringType:
        case c10::TypeKind::NoneType:
        case c10::TypeKind::OptionalType:
        case c10::TypeKind::ListType:
        case c10::TypeKind::DictType:
            break;
        case c10::TypeKind::TupleType:
            if (is_named_tuple(type)) return false;
            break;
        default:
            return false;
        }
        for (const auto &inner : type->containedTypes())
            if (!writable(inner)) return false;
        return true;
    }

    std::string lowp_code_;
    std::string source_;
    int count_ = 0;
};

}  // namespace

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

void LowpCaster::restore_outputs() {
    Node *ret = graph_->return_node();
    for (size_t i = 0; i < ret->inputs().size(); ++i) {
        Value *output = ret->input(i);
        Value *restored = restore_value(output, ret);
        if (restored != output) ret->replaceInput(i, restored);
    }
}

Value *LowpCaster::restore_value(Value *value, Node *ret) {
    const c10::TypePtr &type = value->type();
    if (type->kind() == c10::TypeKind::TensorType) return cast(value, at::kFloat, false, ret);
    if (!contains_tensor_type(type)) return value;

    if (const auto tuple = type->cast<c10::TupleType>()) {
        Node *producer = value->node();
        Node *unpack = nullptr;
        std::vector<Value *> elements;
        if (producer->kind() == c10::prim::TupleConstruct) {
            elements.assign(producer->inputs().begin(), producer->inputs().end());
        } else {
            unpack = graph_->createTupleUnpack(value);
            unpack->insertBefore(ret);
            elements.assign(unpack->outputs().begin(), unpack->outputs().end());
            const auto known = tuple_sets_.find(value);
            if (known != tuple_sets_.end() && known->second.size() == elements.size())
                for (size_t i = 0; i < elements.size(); ++i) sets_[elements[i]] = known->second[i];
        }
        std::vector<Value *> restored;
        bool changed = false;
        for (Value *element : elements) {
            restored.push_back(restore_value(element, ret));
            changed |= restored.back() != element;
        }
        if (!changed) {
            if (unpack) unpack->destroy();
            return value;
        }
        Node *rebuilt = graph_->createTuple(restored, is_named_tuple(type) ? tuple : nullptr);
        rebuilt->insertBefore(ret);
        return rebuilt->output();
    }

    const auto list = type->cast<c10::ListType>();
    if (list && value->node()->kind() == c10::prim::ListConstruct) {
        // Rebuilding from the construct is exact only when nothing else can change the list.
        if (is_fixed_list(value)) {
            std::vector<Value *> restored;
            bool changed = false;
            for (Value *element : value->node()->inputs()) {
                restored.push_back(restore_value(element, ret));
                changed |= restored.back() != element;
            }
            if (!changed) return value;
            Node *rebuilt = graph_->createList(list->getElementType(), restored);
            rebuilt->insertBefore(ret);
            return rebuilt->output();
        }
    }
    if (list && !list_elements(value).contains(lowp_)) return value;
    return restore_with_script(value, ret);
}

Value *LowpCaster::restore_with_script(Value *value, Node *ret) {
    RestoreScript script(lowp_);
    const std::string helper = script.helper_for(value->type());
    if (helper.empty()) {
        result_.skipped.push_back("graph output of type " + value->type()->annotation_str() +
                                  ": cannot be rebuilt; returned with its low-precision tensors");
        return value;
    }
    const auto unit = torch::jit::compile(script.source());
    auto function_graph = torch::jit::toGraphFunction(unit->get_function(helper)).graph()->copy();
    torch::jit::Inline(*function_graph);
    torch::jit::WithInsertPoint guard(ret);
    const auto outputs = torch::jit::insertGraph(*graph_, *function_graph, {value});
    TORCH_INTERNAL_ASSERT(outputs.size() == 1, "restore helper must return one value");
    return outputs[0];
}

}  // namespace ipex::passes
