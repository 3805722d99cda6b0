// What one call of a compute op costs, from its input shapes: the op-kind table the profiler
// (bench/profile.h) asks, and the FLOP formulas behind it. A FLOP is one multiply or one add
// of the op's main product (2 per multiply-accumulate); bias, post-ops, softmax and gates'
// elementwise math are not counted, as benchdnn and the papers that quote "% of peak" count.
//   convolution   2 * N * prod(weight) * prod(output spatial); transposed: prod(input spatial)
//   linear        2 * rows * out_features * in_features
//   matmul        2 * prod(broadcast batch) * n * k * m (1-D operands as matmul promotes them)
//   attention     2 * batch * Lq * Lk * (D + Dv) (causal masks counted in full)
//   lstm/gru      2 * T * N * gates * H * (in + H) per layer and direction (gates 4 / 3)
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ir/op_kinds.h"

namespace ipex::bench {

// What the profiler lists a compute op under (the op-kind table, ir/op_kinds.h); other ops
// are kOther.
using ir::op_kind;
using ir::op_kind_name;
using ir::OpKind;

struct ConvShape {
    std::vector<int64_t> input, weight;  // input [N, C, spatial...] or unbatched [C, spatial...]
    std::vector<int64_t> stride, padding, dilation, output_padding;  // one value or one per spatial dim
    bool transposed = false;
    bool padding_same = false;  // padding='same': output spatial = input spatial
};

int64_t conv_flops(const ConvShape &conv);
int64_t linear_flops(c10::IntArrayRef input, int64_t in_features, int64_t out_features);
// aten::matmul semantics (1-D operands, broadcast batch dims); also mm and bmm.
int64_t matmul_flops(c10::IntArrayRef a, c10::IntArrayRef b);
int64_t attention_flops(c10::IntArrayRef query, c10::IntArrayRef key, c10::IntArrayRef value);
struct RnnShape {
    bool lstm = true;
    int64_t steps = 0, batch = 0, input_size = 0, hidden_size = 0, layers = 1;
    bool bidirectional = false;
};
int64_t rnn_flops(const RnnShape &rnn);

// The work of one call: the dtype its math runs in ("fp32", "bf16", "bf32", "fp16", "int8" or
// the tensor type's name) and its FLOPs (0 for kOther or when the inputs do not say).
struct OpWork {
    OpKind kind = OpKind::kOther;
    std::string dtype;
    int64_t flops = 0;
};
// `inputs` as RecordFunction gives them (the op's schema arguments, boxed).
OpWork op_work(const std::string &name, c10::ArrayRef<const c10::IValue> inputs);

// What tells one layer of an op from another (bench --profile-layers): the tensor arguments'
// sizes ("8x64x56x56 [cl]", channels-last marked), and for prepacked convolutions and linears
// the weight's sizes, stride, padding, dilation and groups from their context:
// "8x64x56x56 [cl] w 64x64x3x3 s1 p1 d1 g1".
std::string op_signature(const std::string &name, c10::ArrayRef<const c10::IValue> inputs);

}  // namespace ipex::bench
