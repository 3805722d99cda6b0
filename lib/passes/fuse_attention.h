// Replaces attention written out as ops by one ipex::attention (ops/attention_op.h):
//
//   P = softmax(S, -1); out = P @ V           (matmul or bmm; P used by nothing else)
//   S = [mask](scale * (Q @ Kt)) [+ bias]     (matmul or bmm)
//
// where, between the product and the softmax, in this order and each optional:
//   - mul / div by constant numbers (any count): the scale (scales after the mask also
//     multiply its fill value);
//   - where(mask, S, fill) or where(mask, fill, S) or masked_fill(S, mask, fill), fill a
//     constant number: the boolean mask (GPT-2 causal buffers, padding masks);
//   - add(S, bias) or add(bias, S) with alpha 1: the additive mask or position bias (BERT and
//     Llama-style masks, T5's relative bias, the decomposed nn.MultiheadAttention masks);
//   - casts to fp32 (S.float(), softmax(..., dtype=float32)) and back before @ V.
// Two-operand einsums that are batched matmuls ("bqhd,bkhd->bhqk", "bhqk,bkhd->bqhd", ...)
// are first rewritten as permutes around aten::matmul, so einsum attention matches too.
// Kt is K transposed (transpose of the last two dims, or a permute swapping them: K is read
// in place), or any tensor (then viewed transposed). Every intermediate value must have no
// other use. Scaled dot products the pattern does not match are left to replace_matmul.
// Run before cast_to_lowp (which casts the op's query, key and value, not its mask or bias);
// needs libipex_ops.so at run time (prepacked mode only).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult fuse_attention(std::shared_ptr<torch::jit::Graph> &graph);

}  // namespace ipex::passes
