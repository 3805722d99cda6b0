#include "ops/conv_chain_op.h"

#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "base/isa.h"
#include "ops/onednn_utils.h"
#include "ops/op_errors.h"
#include "ops/pool_op.h"

namespace ipex::ops {
namespace {

// For a batched input: the chain's output sizes, the bytes per image of its largest
// activation between two convolutions (or after one, with last_too: what a pooling reads), and
// its FLOPs per image; nullopt when a context would
// reject its input (wrong rank or channels, too small), so the plain sequence raises that
// context's own error.
struct ChainSizes {
    std::vector<int64_t> output;
    int64_t intermediate_bytes_per_image = 0;
    int64_t flops_per_image = 0;
};
std::optional<ChainSizes> chain_sizes(at::IntArrayRef input, const ConvChain &contexts, bool last_too = false) {
    ChainSizes sizes;
    std::vector<int64_t> image = input.vec();  // one image's sizes through the chain
    image[0] = 1;
    for (size_t k = 0; k < contexts.size(); ++k) {
        const ConvolutionContext &ctx = *contexts.get(k);
        std::vector<int64_t> out = ctx.taken_output_sizes(image);
        if (out.empty()) return std::nullopt;
        sizes.flops_per_image += ctx.flops(image);
        image = std::move(out);
        if (k + 1 < contexts.size() || last_too) {
            const int64_t bytes = at::elementSize(ctx.output_dtype()) * c10::multiply_integers(image);
            sizes.intermediate_bytes_per_image = std::max(sizes.intermediate_bytes_per_image, bytes);
        }
    }
    sizes.output = std::move(image);
    sizes.output[0] = input[0];
    return sizes;
}

at::Tensor run_in_sequence(const at::Tensor &input, const ConvChain &contexts) {
    at::Tensor x = input;
    for (size_t k = 0; k < contexts.size(); ++k) x = contexts.get(k)->run(x, c10::nullopt);
    return x;
}

}  // namespace

int64_t chain_budget_bytes() {
    if (const char *env = std::getenv("IPEX_CONV_CHAIN_BYTES")) {
        char *end = nullptr;
        const long long v = std::strtoll(env, &end, 10);
        if (end != env && *end == '\0' && v >= 0) return v;
    }
    return isa::l2_cache_bytes() * std::max(1, at::get_num_threads());
}

int64_t chain_part_images(int64_t n, int64_t per_image_bytes, int64_t budget) {
    if (n <= 1 || budget <= 0 || n * per_image_bytes <= budget) return std::max<int64_t>(n, 1);
    const int64_t fit = std::max<int64_t>(1, budget / std::max<int64_t>(per_image_bytes, 1));
    const int64_t parts = (n + fit - 1) / fit;
    return (n + parts - 1) / parts;
}

namespace {

void check_contexts(const char *op, const ConvChain &contexts) {
    IPEX_CHECK_INPUT(!contexts.empty(), op, ": no convolution to run");
    for (size_t k = 0; k < contexts.size(); ++k)
        TORCH_CHECK(tensor_post_op(contexts.get(k)->post_ops()) < 0, op, ": ", contexts.get(k)->describe(),
                    " needs a second tensor");
}

// Images per part of a batch of n (n: the batch at once). A chain with more than
// max_flops_per_byte of arithmetic per byte of its activations (ResNet's bottlenecks) is
// compute-bound either way: parts would only make its GEMMs smaller.
int64_t part_images(const std::optional<ChainSizes> &sizes, int64_t n, double max_flops_per_byte) {
    const bool memory_bound =
        sizes && static_cast<double>(sizes->flops_per_image) <=
                     max_flops_per_byte * static_cast<double>(sizes->intermediate_bytes_per_image);
    return memory_bound ? chain_part_images(n, sizes->intermediate_bytes_per_image, chain_budget_bytes()) : n;
}

}  // namespace

at::Tensor convolution_chain(const at::Tensor &input, const ConvChain &contexts) {
    check_contexts("ipex::convolution_chain", contexts);
    const int64_t rank = contexts.get(0)->spatial_dims() + 2;
    const bool unbatched = input.dim() == rank - 1;
    const at::Tensor x = unbatched ? input.unsqueeze(0) : input;
    const auto sizes = input.is_floating_point() && contexts.size() > 1 ? chain_sizes(x.sizes(), contexts)
                                                                         : std::nullopt;
    const int64_t n = x.dim() > 0 ? x.size(0) : 0;
    const int64_t part = part_images(sizes, n, kChainMaxFlopsPerByte);
    if (!sizes || part >= n) return run_in_sequence(input, contexts);

    const ConvolutionContext &last = *contexts.get(contexts.size() - 1);
    const at::Tensor out = empty_channels_last(sizes->output, last.output_dtype());
    for (int64_t start = 0; start < n; start += part) {
        const int64_t images = std::min(part, n - start);
        at::Tensor y = x.narrow(0, start, images);
        for (size_t k = 0; k + 1 < contexts.size(); ++k) y = contexts.get(k)->run(y, c10::nullopt);
        last.run_into(y, out.narrow(0, start, images));
    }
    return unbatched ? out.squeeze(0) : out;
}

at::Tensor convolution_max_pool(const at::Tensor &input, const ConvChain &contexts, at::IntArrayRef kernel_size,
                                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                bool ceil_mode) {
    check_contexts("ipex::convolution_max_pool", contexts);
    const auto pool = [&](const at::Tensor &y) {
        return ops::max_pool2d(y, kernel_size, stride, padding, dilation, ceil_mode);
    };
    const bool batched = input.dim() == 4 && contexts.get(0)->spatial_dims() == 2;
    const auto sizes = batched && input.is_floating_point() ? chain_sizes(input.sizes(), contexts, true) : std::nullopt;
    const int64_t n = batched ? input.size(0) : 0;
    const int64_t part = part_images(sizes, n, kPoolMaxFlopsPerByte);
    if (!sizes || part >= n) return pool(run_in_sequence(input, contexts));

    // The first part's pooling gives the output's sizes; when it is not one max_pool2d_into
    // writes (not channels-last, or arguments aten rejects), the batch runs whole.
    at::Tensor y = run_in_sequence(input.narrow(0, 0, part), contexts);
    auto pooled = max_pool2d_sizes(y, kernel_size, stride, padding, dilation, ceil_mode);
    if (!pooled) return pool(run_in_sequence(input, contexts));
    (*pooled)[0] = n;
    const at::Tensor out = empty_channels_last(*pooled, y.scalar_type());
    for (int64_t start = 0; start < n; start += part) {
        const int64_t images = std::min(part, n - start);
        if (start > 0) y = run_in_sequence(input.narrow(0, start, images), contexts);
        max_pool2d_into(y, kernel_size, stride, padding, dilation, ceil_mode, out.narrow(0, start, images));
    }
    return out;
}

}  // namespace ipex::ops
