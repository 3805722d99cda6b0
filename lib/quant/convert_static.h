// Static INT8 conversion. Portable form: stock PyTorch quantized ops (engine onednn), per op
// quantize_per_tensor -> quantized::conv{1,2,3}d[_relu] / quantized::linear[_relu] ->
// quantized::add[_relu] for fused residual adds, with packed weights stored as graph
// constants (they pickle with the model); stock conv/linear read quint8 only, so s8
// activations run there as u8 with zero point + 128 (the same values). ipex form:
// ipex::int8_op / ipex::int8_op_sum on u8 or s8 activations, each tensor in the dtype its
// qconfig entry names (an op reading an int8 producer takes the producer's dtype and
// parameters). int8 activations flow on between int8 ops and
// through max/avg pooling, flatten, reshape and relu; aten::dequantize appears only where
// an fp32 op reads an int8 value. Needs a prepared graph (quant_graph.h) and ops already
// checked against the qconfig (quantize.h). Stock libtorch runs the portable result.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

#include "quant/qconfig.h"
#include "quant/quant_graph.h"

namespace ipex::quant {

struct ConvertCounts {
    int int8_ops = 0;        // conv/linear/matmul now in int8
    int fused_relu = 0;
    int fused_add = 0;
    int kept_fp32 = 0;       // quantizable ops left in fp32
    int bf16_ops = 0;        // quantizable ops run in bf16
    int int8_passthrough = 0;  // pooling/flatten/... run on int8 values
    int int8_maps = 0;       // dequantize + activations + quantize as one lookup (elementwise_maps.h)
    int fp32_maps = 0;       // dequantize + activations as one lookup
    int int8_cat_norms = 0;  // [cat of] dequantize + batch norm [+ relu] + quantize as one op
    int int8_gate_means = 0;     // a mean of a mapped int8 value read from the int8 values
    int int8_gate_products = 0;  // a product with one, quantized, read from the int8 values
    std::vector<torch::jit::Node *> fp32_nodes;  // the kept_fp32 ops
};

// `dtype_of_unlisted`: fp32 or bf16, for ops the qconfig does not list. With bf16, ops to run
// in bf16 are left as they are for run_outside_int8_in_bf16 (mixed_bf16.h), called after. With `ipex_ops` the
// int8 ops are ipex::int8_op / ipex::int8_op_sum (prepacked oneDNN int8 primitives, a
// residual add fused as a sum post-op; needs libipex_ops.so) instead of stock quantized ops.
ConvertCounts convert_static(torch::jit::Graph &graph, const std::vector<QuantOp> &ops, const QConfig &config,
                               const std::string &dtype_of_unlisted, bool ipex_ops);

// Runs one op of a kept quantizable op in bf16 (casts around it); shared with the dynamic path.
void run_op_in_bf16(torch::jit::Graph &graph, const QuantOp &op);

// Packs a per-channel symmetric int8 weight with the stock prepack op of `op.kind`.
c10::IValue prepack_weight(const QuantOp &op, const std::vector<double> &scales);

}  // namespace ipex::quant
