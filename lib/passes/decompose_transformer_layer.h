// Rewrites PyTorch's fused encoder-layer op (aten::_transformer_encoder_layer_fwd, which
// nn.TransformerEncoderLayer records when traced for inference) into its linears, attention
// matmuls, softmax, layer norms and activation, so the dtype cast, prepacking and fusion passes
// can see them. Needs constant weights (frozen graph); leaves layers with a mask, or whose input
// is not known to be 3-D (batch, sequence, embedding), as they are. Scripted modules first
// lose their run-time choice of fused fast path (that op, nn.MultiheadAttention's
// _native_multi_head_attention and the encoder's nested-tensor conversion): the branch with
// the plain ops, which computes the same result, is the one kept. count = layers rewritten
// plus fast paths taken out.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "passes/pass_result.h"

namespace ipex::passes {

PassResult decompose_transformer_layer(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
