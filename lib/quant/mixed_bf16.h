// quantize --mixed-dtype bf16: every float op outside the int8 regions runs in bf16. Each
// aten::dequantize edge is made to produce bf16, then the bf16 cast pass of the optimize
// pipeline (passes/cast_to_lowp.h) runs the remaining conv/linear/matmul in bf16, lets ops
// that run in any dtype (pooling, unfused adds, reshapes, activations) follow, keeps what its
// tables keep in fp32 and casts the model outputs back to fp32. Quantizable ops the qconfig
// keeps in fp32 are put back to fp32. With the ipex int8 ops, dequantize + cast become one
// ipex::dequantize_bf16; a dequantize that only feeds fp32 consumers or the outputs stays fp32.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

namespace ipex::quant {

struct MixedBf16Result {
    bool applied = false;       // false: no compute-bound op outside int8, nothing changed
    int compute_ops = 0;        // conv/linear/matmul... now in bf16
    int bf16_edges = 0;         // int8 -> bf16 edges (dequantize producing bf16)
    std::vector<std::string> kept_fp32;  // "<op>: <why>" from the cast pass
};

// `keep_fp32`: nodes of quantizable ops the qconfig keeps in fp32 (they stay fp32).
MixedBf16Result run_outside_int8_in_bf16(std::shared_ptr<torch::jit::Graph> &graph,
                                         const std::vector<torch::jit::Node *> &keep_fp32, bool ipex_ops);

}  // namespace ipex::quant
