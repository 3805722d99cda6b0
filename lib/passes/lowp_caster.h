// Internal to cast_to_lowp: the graph walker that tracks possible dtypes and inserts casts.
#pragma once

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/lowp_dtypes.h"
#include "passes/lowp_op_tables.h"
#include "ir/pass_result.h"

namespace ipex::passes {

inline bool is_tensor(const c10::TypePtr &type) { return type->kind() == c10::TypeKind::TensorType; }

// Tensor or Optional[Tensor].
inline bool is_tensor_like(const c10::TypePtr &type) {
    if (is_tensor(type)) return true;
    const auto optional = type->cast<c10::OptionalType>();
    return optional && is_tensor(optional->getElementType());
}

inline bool is_tensor_list(const c10::TypePtr &type) {
    const auto list = type->cast<c10::ListType>();
    return list && is_tensor_like(list->getElementType());
}

inline bool contains_tensor_type(const c10::TypePtr &type) {
    if (is_tensor(type)) return true;
    for (const auto &inner : type->containedTypes())
        if (contains_tensor_type(inner)) return true;
    return false;
}

// Whether the op writes its index-th argument (in-place and out= forms).
inline bool writes_argument(const torch::jit::Node *node, size_t index) {
    const auto *schema = node->maybeSchema();
    if (!schema || index >= schema->arguments().size()) return false;
    const auto *alias = schema->arguments()[index].alias_info();
    return alias && alias->isWrite();
}

// Arguments that select or index rather than carry values into the result.
inline bool is_selector_argument(const std::string &name) {
    return name == "condition" || name == "mask" || name == "index" || name == "indices" || name == "offsets";
}

inline std::string dtype_text(at::ScalarType type) { return type == at::kBFloat16 ? "bf16" : "fp16"; }

class LowpCaster {
public:
    LowpCaster(std::shared_ptr<torch::jit::Graph> graph, at::ScalarType lowp);

    // True when some op would run in the low dtype (checked before anything changes).
    bool has_candidates();
    void run(bool keep_dtype_outputs);
    PassResult take_result();

private:
    using Value = torch::jit::Value;
    using Node = torch::jit::Node;

    // dtype-set bookkeeping
    DtypeSet set_of(const Value *value) const;
    DtypeSet list_elements(const Value *value) const;
    std::optional<DtypeSet> appended_list_elements(const Value *list) const;
    void set_outputs(Node *node, const DtypeSet &set);
    bool is_fixed_list(const Value *list) const;
    bool may_be_written(const Value *value) const;

    // walking
    void process_block(torch::jit::Block *block);
    void process_node(Node *node);
    void process_structural(Node *node);
    void merge_tuple_sets(Node *branch, size_t index);
    void process_op(Node *node);
    const LowpOpInfo *effective_info(Node *node, bool *is_candidate);
    // Records in `skipped` that an op which would run in low precision stays fp32.
    void note_if_kept_fp32(Node *node, const LowpOpInfo *info);
    void cast_inputs_lowp(Node *node);
    void cast_inputs_fp32(Node *node);
    void cast_list_input(Node *node, size_t index);
    void compute_outputs(Node *node, OutputRule rule);
    DtypeSet promoted_operands(Node *node) const;
    DtypeSet first_operand(Node *node) const;
    bool may_see_lowp(Node *node) const;
    bool input_dtype_argument(Node *node) const;

    // casts
    Value *cast(Value *value, at::ScalarType to, bool must_be_floating, Node *consumer);
    Value *emit_cast(Value *value, at::ScalarType to, bool guarded, Node *insert_before);
    Value *lowp_constant(Value *constant);
    Node *insertion_point_after(Value *value) const;

    // softmax between casts (cast_to_lowp.cpp)
    void narrow_softmax();

    // graph outputs (lowp_outputs.cpp)
    void restore_outputs();
    Value *restore_value(Value *value, Node *ret);
    Value *restore_with_script(Value *value, Node *ret);

    std::shared_ptr<torch::jit::Graph> graph_;
    at::ScalarType lowp_;
    bool conv_transpose_ok_;
    bool embedding_bag_ok_;
    bool batch_norm_mixed_ok_;
    std::unique_ptr<torch::jit::AliasDb> alias_db_;
    std::unordered_set<const Value *> original_values_;
    std::vector<const Value *> mutated_lists_;  // tensor lists written by some op
    std::unordered_map<const Value *, DtypeSet> sets_;
    std::unordered_map<const Value *, DtypeSet> list_sets_;
    std::unordered_map<const Value *, std::vector<DtypeSet>> tuple_sets_;
    std::map<std::tuple<const Value *, int, bool>, Value *> cast_memo_;
    std::unordered_map<const Value *, Value *> lowp_constants_;
    std::set<std::string> noted_;
    std::set<std::string> modules_seen_;
    PassResult result_;
};

}  // namespace ipex::passes
