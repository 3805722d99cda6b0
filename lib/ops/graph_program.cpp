#include "ops/graph_program.h"

#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/conv_chain_op.h"
#include "ops/onednn_utils.h"
#include "ops/op_errors.h"

namespace ipex::ops {
namespace {

int64_t read_of(at::IntArrayRef program, size_t k) { return program[2 * k]; }
int64_t summand_of(at::IntArrayRef program, size_t k) { return program[2 * k + 1]; }

// The last step that reads each value (as its input or summand); -1 for none. The last value,
// the op's result, is read after every step.
std::vector<int64_t> last_reads(at::IntArrayRef program, size_t steps) {
    std::vector<int64_t> last(steps + 1, -1);
    for (size_t k = 0; k < steps; ++k) {
        last[read_of(program, k)] = static_cast<int64_t>(k);
        if (summand_of(program, k) >= 0) last[summand_of(program, k)] = static_cast<int64_t>(k);
    }
    last[steps] = std::numeric_limits<int64_t>::max();
    return last;
}

// The step whose output becomes value `end` through sums written in place over a summand
// nothing reads later (each one's summand made by the step before in the chain, inside the
// run), where that step has no sum and can write into a given tensor; -1 for none.
int64_t root_of(const std::vector<GraphStep> &steps, at::IntArrayRef program, const std::vector<int64_t> &last,
                size_t begin, size_t end) {
    int64_t k = static_cast<int64_t>(end) - 1;
    while (k >= static_cast<int64_t>(begin)) {
        const int64_t sum = summand_of(program, k);
        if (sum < 0) return steps[k].run_into ? k : -1;
        const bool dead = last[sum] == k && read_of(program, k) != sum;
        if (!steps[k].sums_in_place || !dead || sum <= static_cast<int64_t>(begin)) return -1;
        k = sum - 1;  // value sum is step sum - 1's output
    }
    return -1;
}

// Steps [begin, end) on `input` (value `begin`: the op's input or the output of step begin - 1),
// values dropped after their last read (so the allocator hands their memory, still in cache, to
// the next ones); value `end`, in `into` where given and root_of names a step to write there.
at::Tensor run_steps(const at::Tensor &input, const std::vector<GraphStep> &steps, at::IntArrayRef program,
                     const std::vector<int64_t> &last, size_t begin, size_t end, const at::Tensor *into = nullptr) {
    std::vector<at::Tensor> values(steps.size() + 1);
    values[begin] = input;
    const int64_t root = into ? root_of(steps, program, last, begin, end) : -1;
    for (size_t k = begin; k < end; ++k) {
        const at::Tensor &src = values[read_of(program, k)];
        const int64_t sum = summand_of(program, k);
        // A summand read by nothing later may take the output (never the caller's input).
        const bool dead = sum > 0 && last[sum] == static_cast<int64_t>(k) && read_of(program, k) != sum;
        if (static_cast<int64_t>(k) == root) values[k + 1] = steps[k].run_into(src, *into);
        if (!values[k + 1].defined()) values[k + 1] = steps[k].run(src, sum >= 0 ? &values[sum] : nullptr, dead);
        for (size_t v = begin; v <= k; ++v)
            if (last[v] == static_cast<int64_t>(k)) values[v].reset();
    }
    return values[end];
}

// Steps a run of images at a time takes together, and how many images.
struct Segment {
    size_t begin = 0, end = 0;
    int64_t part = 0;
};

// The program cut where one value alone is read by every later step (between two ResNet
// blocks), each piece's part size from its own values and pixels, then neighbours of the same
// part size joined: a ResNet's 56x56 and 28x28 stages one image at a time, its 7x7 stage whole.
std::vector<Segment> segments(const std::vector<GraphStep> &all, at::IntArrayRef program,
                              const std::vector<std::vector<int64_t>> &sizes, int64_t input_element_bytes) {
    const size_t steps = all.size();
    // earliest[k]: the oldest value steps k.. read.
    std::vector<int64_t> earliest(steps + 1, std::numeric_limits<int64_t>::max());
    for (size_t k = steps; k-- > 0;) {
        const int64_t sum = summand_of(program, k);
        earliest[k] = std::min({earliest[k + 1], read_of(program, k), sum >= 0 ? sum : earliest[k + 1]});
    }
    const int64_t n = sizes[0][0], budget = chain_budget_bytes();
    std::vector<Segment> out;
    size_t begin = 0;
    for (size_t k = 1; k <= steps; ++k) {
        if (k < steps && earliest[k] < static_cast<int64_t>(k)) continue;  // an older value is read later
        // The largest value of one image (the piece's input included) and the fewest output
        // pixels of one image any of its convolutions makes.
        int64_t per_image = 0, fewest_pixels = std::numeric_limits<int64_t>::max();
        for (size_t v = begin; v <= k; ++v) {
            const std::vector<int64_t> &s = sizes[v];
            const int64_t values = c10::multiply_integers(s.begin() + 1, s.end());
            const int64_t bytes = v == 0 ? input_element_bytes : all[v - 1].output_element_bytes;
            per_image = std::max(per_image, bytes * values);
            if (v > begin) fewest_pixels = std::min(fewest_pixels, values / s[1]);
        }
        const int64_t fewest_images = (kGraphMinPartPixels + fewest_pixels - 1) / fewest_pixels;
        const int64_t part = std::min(n, std::max(chain_part_images(n, per_image, budget), fewest_images));
        if (!out.empty() && out.back().part == part)
            out.back().end = k;
        else
            out.push_back({begin, k, part});
        begin = k;
    }
    return out;
}

// An empty batch of n images laid out as the part `y` (channels-last or not), its dtype, and
// for a quantized part its scale and zero point.
at::Tensor batch_like(const at::Tensor &y, int64_t n) {
    std::vector<int64_t> whole = y.sizes().vec();
    whole[0] = n;
    const auto format =
        y.is_contiguous(at::MemoryFormat::ChannelsLast) ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    if (y.is_quantized())
        return at::_empty_affine_quantized(whole, y.options(), y.q_scale(), y.q_zero_point(), format);
    return at::empty(whole, y.options().memory_format(format));
}

// `y` into `slice` (its place in the batch): a parallel copy of the bytes where both are laid out
// alike and dense (always, from batch_like), else aten's copy.
void copy_part(const at::Tensor &y, const at::Tensor &slice) {
    if (y.strides() != slice.strides() || !y.is_non_overlapping_and_dense() || y.scalar_type() != slice.scalar_type() ||
        !slice.is_non_overlapping_and_dense()) {
        slice.copy_(y);
        return;
    }
    const auto *from = static_cast<const char *>(y.data_ptr());
    auto *to = static_cast<char *>(slice.data_ptr());
    at::parallel_for(0, static_cast<int64_t>(y.nbytes()), 1 << 16, [&](int64_t begin, int64_t end) {
        std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin));
    });
}

}  // namespace

void check_graph_program(const char *op, const std::vector<GraphStep> &steps, at::IntArrayRef program) {
    IPEX_CHECK_INPUT(!steps.empty(), op, ": no convolution to run");
    IPEX_CHECK_INPUT(program.size() == 2 * steps.size(), op, ": the program holds ", program.size(),
                     " values for ", steps.size(), " convolutions (two each)");
    for (size_t k = 0; k < steps.size(); ++k) {
        const int64_t read = read_of(program, k), sum = summand_of(program, k);
        const int64_t made = static_cast<int64_t>(k);  // values 0 .. k exist before step k
        IPEX_CHECK_INPUT(read >= 0 && read <= made && sum >= -1 && sum <= made, op, ": convolution ", k,
                         " reads value ", read, " and adds value ", sum, "; only values 0 to ", made,
                         " exist before it (-1: no sum)");
        IPEX_CHECK_INPUT(steps[k].has_sum == (sum >= 0), op, ": convolution ", k, " (", steps[k].describe(),
                         steps[k].has_sum ? ") has a sum post-op and no summand"
                                          : ") has no sum post-op but a summand");
    }
}

std::vector<std::vector<int64_t>> graph_value_sizes(at::IntArrayRef input, const std::vector<GraphStep> &steps,
                                                    at::IntArrayRef program) {
    std::vector<std::vector<int64_t>> sizes{input.vec()};
    for (size_t k = 0; k < steps.size(); ++k) {
        std::vector<int64_t> out = steps[k].output_sizes(sizes[read_of(program, k)]);
        if (out.empty()) return {};
        const int64_t sum = summand_of(program, k);
        if (sum >= 0 && sizes[sum] != out) return {};  // a broadcast sum: run whole, as the contexts do
        sizes.push_back(std::move(out));
    }
    return sizes;
}

at::Tensor run_graph_program(const char *op, const at::Tensor &input, const std::vector<GraphStep> &steps,
                             at::IntArrayRef program) {
    check_graph_program(op, steps, program);
    const auto sizes =
        input.dim() == 4 ? graph_value_sizes(input.sizes(), steps, program) : std::vector<std::vector<int64_t>>{};
    const std::vector<int64_t> last = last_reads(program, steps.size());
    if (sizes.empty()) return run_steps(input, steps, program, last, 0, steps.size());

    const int64_t n = input.size(0);
    at::Tensor x = input;
    for (const Segment &seg : segments(steps, program, sizes, input.element_size())) {
        if (seg.part >= n) {
            x = run_steps(x, steps, program, last, seg.begin, seg.end);
            continue;
        }
        at::Tensor out;
        for (int64_t start = 0; start < n; start += seg.part) {
            const int64_t images = std::min(seg.part, n - start);
            // From the second part on, the batch's output exists: its slice may take the part's result.
            const at::Tensor slice = out.defined() ? out.narrow(0, start, images) : at::Tensor();
            const at::Tensor y = run_steps(x.narrow(0, start, images), steps, program, last, seg.begin, seg.end,
                                           out.defined() ? &slice : nullptr);
            if (!out.defined()) out = batch_like(y, n);
            if (y.data_ptr() != out.narrow(0, start, images).data_ptr() || y.strides() != out.strides())
                copy_part(y, out.narrow(0, start, images));
        }
        x = out;
    }
    return x;
}

}  // namespace ipex::ops
