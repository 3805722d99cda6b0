#include "ops/conv_chain_op.h"

#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/isa.h"
#include "ops/onednn_utils.h"
#include "ops/op_errors.h"

namespace ipex::ops {
namespace {

// For a batched input: the chain's output sizes, the bytes per image of its largest
// activation between two convolutions, and its FLOPs per image; nullopt when a context would
// reject its input (wrong rank or channels, too small), so the plain sequence raises that
// context's own error.
struct ChainSizes {
    std::vector<int64_t> output;
    int64_t intermediate_bytes_per_image = 0;
    int64_t flops_per_image = 0;
};
std::optional<ChainSizes> chain_sizes(at::IntArrayRef input, const ConvChain &contexts) {
    ChainSizes sizes;
    std::vector<int64_t> image = input.vec();  // one image's sizes through the chain
    image[0] = 1;
    for (size_t k = 0; k < contexts.size(); ++k) {
        const ConvolutionContext &ctx = *contexts.get(k);
        if (static_cast<int64_t>(image.size()) != ctx.spatial_dims() + 2 || image[1] != ctx.in_channels())
            return std::nullopt;
        sizes.flops_per_image += ctx.flops(image);
        image = ctx.output_sizes(image);
        for (int64_t s : image)
            if (s < 1) return std::nullopt;
        if (k + 1 < contexts.size()) {
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

at::Tensor convolution_chain(const at::Tensor &input, const ConvChain &contexts) {
    IPEX_CHECK_INPUT(!contexts.empty(), "ipex::convolution_chain: no convolution to run");
    for (size_t k = 0; k < contexts.size(); ++k)
        TORCH_CHECK(tensor_post_op(contexts.get(k)->post_ops()) < 0, "ipex::convolution_chain: ",
                    contexts.get(k)->describe(), " needs a second tensor");
    const int64_t rank = contexts.get(0)->spatial_dims() + 2;
    const bool unbatched = input.dim() == rank - 1;
    const at::Tensor x = unbatched ? input.unsqueeze(0) : input;
    const auto sizes = input.is_floating_point() && contexts.size() > 1 ? chain_sizes(x.sizes(), contexts)
                                                                         : std::nullopt;
    const int64_t n = x.dim() > 0 ? x.size(0) : 0;
    // A chain with much arithmetic per byte between its convolutions (ResNet's bottlenecks) is
    // compute-bound either way: parts would only make its GEMMs smaller.
    const bool memory_bound =
        sizes && static_cast<double>(sizes->flops_per_image) <=
                     kChainMaxFlopsPerByte * static_cast<double>(sizes->intermediate_bytes_per_image);
    const int64_t part =
        memory_bound ? chain_part_images(n, sizes->intermediate_bytes_per_image, chain_budget_bytes()) : n;
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

}  // namespace ipex::ops
