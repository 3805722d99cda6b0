// The own-kernel plans of a ConvolutionContext (conv_context.h): what each own kernel of
// own_kernels.h keeps to compute a convolution instead of oneDNN (depthwise, pointwise,
// grouped, or the trailing activation split from oneDNN's convolution), and how a choice
// between the two is kept per input shape. Internal to the convolution op's sources.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "ops/conv_context.h"
#include "ops/own_kernels.h"
#include "ops/own_stem.h"
#include "ops/primitive_cache.h"

namespace ipex::ops {

// A choice timed at run time, kept per input shape.
struct TimedChoice {
    bool own = false;
};
using TimedChoices = PrimitiveCache<TimedChoice>;

// What each own-kernel plan (depthwise, pointwise, grouped, split) keeps for choosing it per shape.
struct OwnChoice {
    own_kernels::Choice choice = own_kernels::Choice::timed;
    std::shared_ptr<TimedChoices> timed = std::make_shared<TimedChoices>();
};

// How an own kernel is chosen for a convolution of these types, when one may run it: fp32 or
// bf16 where the CPU runs the kernel (`available`, by the math dtype: own_kernels::available,
// depthwise_available, grouped_available or the Winograd kernel's), its output in the math
// dtype, unless IPEX_CONV_KERNELS=0.
std::optional<own_kernels::Choice> own_choice(const ComputeTypes &types, bool (*available)(bool bf16));

// A weight packed for an own kernel on the kernel's first run (or timing): a second copy beside
// oneDNN's, held only by convolutions that run that kernel. Thread safe.
class LazyPackedWeight {
public:
    size_t bytes() const { return bytes_.load(std::memory_order_acquire); }
    template <class Pack>
    const at::Tensor &get(const Pack &pack) const {
        std::call_once(once_, [&] {
            packed_ = pack();
            bytes_.store(packed_.nbytes(), std::memory_order_release);
        });
        return packed_;
    }

private:
    mutable std::once_flag once_;
    mutable at::Tensor packed_;             // read only after call_once
    mutable std::atomic<size_t> bytes_{0};  // its size, for bytes() at any time
};

struct ConvolutionContext::Depthwise : OwnChoice {
    at::Tensor weight;  // kh x kw x c, fp32 (bf16 values for a bf16 convolution)
    at::Tensor weight_pairs;  // bf16 convolution: own_kernels::pack_weight_pairs (int16)
    at::Tensor weight_blocks;  // the AVX2 build: own_kernels::pack_weight_blocks
    at::Tensor bias;    // c, fp32 (rounded to bf16 for a bf16 output), or undefined
    own_kernels::Problem problem;  // the post-ops and the weight's geometry
};

struct ConvolutionContext::Pointwise : OwnChoice {
    at::Tensor bias;  // fp32 (bf16 values for bf16), padded to 16 lanes, or undefined
    // The kernel's problem but for the tensors and sizes, set per call: the dtype, the post-ops
    // and a residual sum first in them (fuse_conv_sum's).
    own_kernels::Pointwise problem;

    // `weight` (n x k x 1 x 1) packed as own_kernels::Pointwise says, on the kernel's first run.
    LazyPackedWeight packed;
};

struct ConvolutionContext::Grouped : OwnChoice {
    LazyPackedWeight weight;  // packed as own_kernels::Grouped says (bf16 or fp32), on the first run
    at::Tensor bias;    // fp32 (bf16 values for bf16), or undefined
    own_kernels::Grouped problem;  // everything but the tensors and the input's sizes
    // The convolution's groups per group of the kernel: 1, or for groups of fewer than 16
    // outputs (ResNeXt's 4 and 8), as many as make 16 outputs, their weights placed on the
    // diagonal of one group's weight with zeros around them.
    int64_t merged = 1;
};

// oneDNN's Winograd convolution of a dense 3x3 fp32 convolution of stride and dilation 1:
// F(4x4, 3x3) or F(2x2, 3x3) as oneDNN picks per shape, about half the time of its direct
// kernels where the image has enough tiles (measured on AVX-512: 900-1100 GFLOP/s of the
// direct convolution's FLOPs against 490-600). It takes the blocked layout (nChw16c) only, so a
// call reorders the channels-last input (and a summand) into it and the output back, and it
// holds its own copies of the weights in oneDNN's Winograd layouts (1.8x the weight for
// F(2x2, 3x3), 4x for F(4x4, 3x3)), packed on the first call of a shape that takes them. oneDNN
// blocks them by the shape, so a context keeps at most kMaxLayouts of them, the first shapes'
// (ResNet-50 needs one per convolution): a shape that would need another runs the direct kernel.
// Its sums differ from the direct convolution's in the last bits (transforms of the tiles in
// fp32: relative errors up to 2e-6 of the output's largest value, tests/unit/ops/winograd_test).
constexpr const char *kWinogradVariable = "IPEX_CONV_WINOGRAD";
struct ConvolutionContext::Winograd : OwnChoice {
    static constexpr size_t kMaxLayouts = 2;
    struct Shape;  // per input shape: the primitives, or none where oneDNN has no such kernel
    std::shared_ptr<PrimitiveCache<Shape>> shapes = std::make_shared<PrimitiveCache<Shape>>();
    std::shared_ptr<WeightCache> weights;  // the Winograd copies (the plain weight shared)
};

struct ConvolutionContext::Split : OwnChoice {
    c10::intrusive_ptr<ConvolutionContext> head;  // without the trailing activation
    own_kernels::Problem activation;         // its post-ops and output dtype only
};


// The own bf16 kernel of a convolution on 1-4 input channels (own_stem.h): a network's stem,
// which reads the network's fp32 planes itself. Its choice is timed from fp32 planes with the
// caches emptied before each call (the input of a network's first layer comes from memory),
// oneDNN's side with the conversion to its channels-last bf16 input counted.
struct ConvolutionContext::Stem : OwnChoice {
    own_stem::Plan plan;
};

}  // namespace ipex::ops
