// Replaces aten::lstm / aten::gru (the .input overloads of nn.LSTM and nn.GRU, traced or
// scripted) whose weights are constants by ipex::lstm / ipex::gru holding a prepacked oneDNN
// RnnContext. Needs a frozen graph (constant weights) and the ops library; no-op when the
// graph has no such node. `dtype` "bf16" runs them with bf16 weights and math; anything else
// in fp32. Inputs and outputs keep aten's dtype and layout.
// Left as aten and named in `skipped`: proj_size, packed sequences (aten::lstm.data),
// dropout in training, weights or flags that are not constants, shapes oneDNN refuses.
// count = ops replaced; modules = their module paths.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>

#include "ir/pass_result.h"

namespace ipex::passes {

PassResult optimize_lstm(std::shared_ptr<torch::jit::Graph> &graph, const std::string &dtype);

}  // namespace ipex::passes
