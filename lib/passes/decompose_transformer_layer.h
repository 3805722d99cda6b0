// Rewrites PyTorch's fused transformer ops into the plain computation with constant weights,
// so the dtype cast, prepacking, attention and fusion passes can see the linears, matmuls,
// softmax, layer norms and activation:
//  - aten::_transformer_encoder_layer_fwd (nn.TransformerEncoderLayer traced for inference):
//    merged q/k/v projection, attention, out projection, residual adds, both norm_first forms,
//    relu or gelu, with or without a key-padding or attention mask;
//  - aten::_native_multi_head_attention (nn.MultiheadAttention traced for inference, e.g. in
//    ViT): self- or cross-attention, masks, need_weights (averaged or per head) either way;
//  - the encoder's nested-tensor detour (aten::_nested_tensor_from_mask ... to_padded_tensor),
//    which becomes the padded computation with the key-padding mask, padded rows zeroed.
// Scripted modules first lose their run-time choice of fast path: the branch with the plain
// ops, which computes the same result, is the one kept. Needs a frozen graph (constant
// weights); graphs read from a file, which know no ranks or dtypes, are fine (the fast path only
// ever ran on 3-D input). An op whose input is known to be of another rank or nested, whose
// mask is known to be an integer tensor, or whose flags or weights are not constants is kept
// and named in `skipped`. count = ops rewritten plus fast paths taken out.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult decompose_transformer_layer(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
