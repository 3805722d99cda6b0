// The program of a graph op (ipex::convolution_graph, ops/conv_graph_op.h; ipex::int8_graph,
// ops/int8/int8_graph.h): steps (convolutions) that read one another's outputs and the op's input
// and nothing else, residual sums included, run the whole batch at once or a few images at a time.
//
// The program holds two values per step k: the value it reads and the value its sum adds (-1:
// none). Value 0 is the op's input, value k + 1 the output of step k; each step reads values
// made before it, and the op returns the last one. A summand that nothing after its sum reads
// may be written over (never the op's input).
//
// A 4-D batch runs in pieces: the program is cut where one value alone is read by every later
// step (between two blocks), and each piece gets a part size, the batch in the fewest equal
// parts of whole images whose largest value fits the cache budget (chain_budget_bytes), but at
// least kGraphMinPartPixels output pixels a part in each of its steps (ResNet-50's 7x7 stage at
// batch 16 ran 11% slower in parts of 4 images, 196 pixels each). Neighbouring pieces of the same
// part size run together, a part at a time through all of them, the last one's output copied
// into its slice of the batch (or written there: where the last value is a chain of sums in
// place over the output of one step without a sum, as in a ResNet stage, from the second part
// on that step writes into the slice, run_into): the activations between the steps, a ResNet stage's 256-channel
// sums of 3.2 MB per 56x56 image in fp32, go to cache and back instead of memory. Images are
// computed independently by every step, so the values are those of the steps run one after the
// other on the whole batch, which is also how a piece whose part is the batch runs, and an
// input that is not what the steps take (their own errors are raised then).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

namespace ipex::ops {

constexpr int64_t kGraphMinPartPixels = 784;

// One step as the program runner sees it.
struct GraphStep {
    // The output sizes for a batched input of these sizes; empty when the step rejects them.
    std::function<std::vector<int64_t>(const std::vector<int64_t> &)> output_sizes;
    int64_t output_element_bytes = 4;
    bool has_sum = false;
    std::function<std::string()> describe;  // for errors (made only when one is raised)
    // The step on `src`, adding `summand` when it has a sum; `summand_dead`: nothing reads the
    // summand later and it is not the op's input, so the output may take its memory.
    std::function<at::Tensor(const at::Tensor &src, const at::Tensor *summand, bool summand_dead)> run;
    // Optional, for a step without a sum: the step written into the memory of `out`
    // (channels-last and dense, of the output's sizes: a part's slice of the batch's output),
    // returned as the step's output there (a quantized output keeps the step's own type, scale
    // and zero point); undefined where the step cannot write there (then `run` runs).
    std::function<at::Tensor(const at::Tensor &src, const at::Tensor &out)> run_into;
    // Whether the step's sum writes its output over a summand that nothing reads later.
    bool sums_in_place = false;
};

// Throws (caller input) unless `program` fits `steps` as above: two values per step, each read
// value made before it, a summand exactly where the step has a sum.
void check_graph_program(const char *op, const std::vector<GraphStep> &steps, at::IntArrayRef program);

// The sizes of every value (0: the input) for a batched input of these sizes, or empty when a
// step rejects what it reads or a summand's sizes differ from its step's output.
std::vector<std::vector<int64_t>> graph_value_sizes(at::IntArrayRef input, const std::vector<GraphStep> &steps,
                                                    at::IntArrayRef program);

// The program on `input` (checked first), in pieces and parts as above.
at::Tensor run_graph_program(const char *op, const at::Tensor &input, const std::vector<GraphStep> &steps,
                             at::IntArrayRef program);

}  // namespace ipex::ops
