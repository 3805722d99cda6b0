// Which aten ops cast_to_lowp runs in the low-precision dtype, which it keeps in fp32, and
// which run in whatever dtype reaches them; plus how each op's output dtype follows from its
// inputs. Ops in no table run in fp32, as in the original model.
#pragma once

#include <ATen/core/interned_strings.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace ipex::passes {

enum class LowpCategory {
    lowp,  // compute-bound: constant weights cast once, activations cast to the low dtype
    fp32,  // numerically sensitive or no low-precision kernel: floating inputs cast to fp32
    any,   // runs in the dtype that arrives (type promotion handles mixed operands)
};

enum class OutputRule {
    same,           // tensor outputs have the dtype of the first tensor input
    promote,        // outputs have the promoted dtype of the value operands
    promote_values, // outputs have the promoted dtype of the first two operands (input, other);
                    // later ones (normalization weights) do not promote
    values_indices, // first output promoted, further tensor outputs are int64 indices
    boolean,        // bool outputs
    indices,        // int64 outputs
    reduce,         // like `same` for floating inputs; integer inputs may widen
    to,             // aten::to: the dtype argument, or the `other` tensor's dtype
    type_as,        // dtype of the second operand
    no_tensor,      // outputs hold no tensor whose dtype matters
};

struct LowpOpInfo {
    LowpCategory category;
    OutputRule rule;
};

// nullptr for ops in no table.
const LowpOpInfo *lowp_op_info(c10::Symbol kind);

// Whether this libtorch can run the core compute ops (linear, conv2d, relu) in `dtype` on
// the CPU; *why names the failure.
bool lowp_dtype_runnable(at::ScalarType dtype, std::string *why);

// Whether transposed convolution gives right results in `dtype` on this libtorch
// (libtorch 1.13 has no working bf16/fp16 conv_transpose on CPU).
bool lowp_conv_transpose_ok(at::ScalarType dtype);

// Whether embedding_bag accepts a `dtype` weight on this libtorch.
bool lowp_embedding_bag_ok(at::ScalarType dtype);

// Whether inference batch_norm takes a `dtype` input with fp32 weight, bias and running
// statistics and gives right `dtype` results (libtorch 1.13: bf16 yes, fp16 no) for 2-D to 5-D
// inputs, contiguous and channels-last.
bool lowp_batch_norm_mixed_ok(at::ScalarType dtype);

}  // namespace ipex::passes
