// Replaces convolutions (aten::conv1d/2d/3d, conv_transpose1d/2d/3d, convolution,
// _convolution) and aten::linear whose weight (and bias) are constants by the ipex ops, each
// holding a prepacked oneDNN context as a graph constant. Needs a frozen graph (constant
// weights) and the ops library linked in; no-op when no such op has constant weights.
// The compute dtype follows the weight: bf16/fp16 weights (from cast_to_lowp) run in that
// dtype, fp32 weights in `fp32_math` ("fp32" strict or "bf32"). Input shapes known from
// --sample-input choose the layout packed now; otherwise batch 1 with 56x56 (2-D), 16^3 (3-D),
// 128 (1-D) spatial and 1 row for linears; other shapes pack on first use.
// A dtype cast or layout copy feeding only such an op is dropped (the op converts once).
// With auto_kernel_selection, each fp32 linear is timed against aten::linear for its shape
// and kept as aten::linear when that is faster; the timings are in details.kernel_choices.
// count = ops replaced; modules = their module paths.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>

#include "ops/ops.h"
#include "ir/pass_result.h"

namespace ipex::passes {

struct PrepackOptions {
    std::string fp32_math = "fp32";  // fp32 | bf32
    bool auto_kernel_selection = false;
};

PassResult prepack_weights(std::shared_ptr<torch::jit::Graph> &graph, const PrepackOptions &options);

// The second half of auto kernel selection, once the model is optimized: each prepacked
// convolution with an own kernel beside oneDNN's (ConvolutionContext::has_kernel_choice) is
// timed both ways at each input shape `log` saw it run (a run of the sample input), `runs`
// alternating calls after a warm-up, and the faster is recorded in its context, so the saved
// model runs that shape the same way in every process. details.conv_kernel_choices lists the
// timings; count = choices recorded; convolutions the log did not see (or all, when `log` is
// null: no sample input) are listed in skipped and choose by timing at run time.
PassResult choose_conv_kernels(std::shared_ptr<torch::jit::Graph> &graph, const ops::KernelShapeLog *log, int runs);

}  // namespace ipex::passes
