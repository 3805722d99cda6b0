// A prepacked convolution (1-D/2-D/3-D, transposed or not): the weight reordered once into
// the blocked layout oneDNN picks, fused post-ops, primitives cached per input shape.
// Activations come out channels-last (NWC/NHWC/NDHWC) in the compute dtype; any input layout
// and floating dtype is accepted (converted once on entry). Pickles to the plain weight and
// parameters, so a saved model repacks for whatever CPU loads it.
#pragma once

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "ops/post_ops.h"
#include "ops/primitive_cache.h"
#include "ops/state_checks.h"
#include "ops/weight_cache.h"

namespace ipex::ops {

// Context dtypes: "fp32" (strict), "bf32" (fp32 tensors, bf16 math allowed), "bf16", "fp16",
// and kBf32ToBf16: bf32 whose output only feeds other bf32 ops' inputs, which round it to
// bf16 first; without AMX it is written in bf16 right away (the same values, half the bytes).
constexpr const char *kBf32ToBf16 = "bf32>bf16";
// The dtype activations have in the graph around the op (bf32: fp32).
at::ScalarType compute_scalar_type(const std::string &dtype);

// How a context dtype runs in oneDNN.
struct ComputeTypes {
    at::ScalarType math;    // src and weights inside the primitive
    at::ScalarType output;  // dst (before promotion by a tensor post-op)
    bool fpmath_bf16;       // bf32 as oneDNN's bf16 fpmath mode
};
// bf32 uses oneDNN's fpmath mode where the CPU has AMX; elsewhere oneDNN keeps such
// primitives in strict fp32, so the op rounds src and weights to bf16 itself (the same math:
// bf16 products, fp32 accumulation and output).
ComputeTypes compute_types(const std::string &dtype);

class ConvolutionContext;

// While one exists (one at a time), the contexts that have a kernel choice log each input shape
// they run and run it oneDNN's way, neither timing nor caching a choice: how optimize learns the
// shapes to choose kernels for from a run of the sample input.
class KernelShapeLog {
public:
    KernelShapeLog();
    ~KernelShapeLog();
    KernelShapeLog(const KernelShapeLog &) = delete;
    KernelShapeLog &operator=(const KernelShapeLog &) = delete;
    // The input shapes `ctx` ran (batched), in the order first seen.
    std::vector<std::vector<int64_t>> shapes_of(const ConvolutionContext *ctx) const;
    // The log in effect, or nullptr.
    static KernelShapeLog *active();
    void add(const ConvolutionContext *ctx, const std::vector<int64_t> &shape);

private:
    mutable std::mutex mutex_;
    std::vector<std::pair<const ConvolutionContext *, std::vector<int64_t>>> shapes_;
};

// The taps of a convolution's weight that read the image for some output position at an input
// size, per spatial dim [lo, hi) (conv_trim.cpp); empty for a transposed convolution or an
// input too small for any output.
struct LiveTaps {
    std::vector<int64_t> lo, hi;
    // Whether some dim loses taps, every cut is symmetric (one padding per dim), at least one tap
    // is left and the padding stays >= 0: when trimmed_for cuts them.
    bool cuts(at::IntArrayRef weight_sizes, const ConvParams &p) const;
};
LiveTaps live_taps(const ConvParams &p, at::IntArrayRef weight_sizes, at::IntArrayRef batched_input);

class ConvolutionContext : public torch::CustomClassHolder {
public:
    // Version 2 adds the recorded kernel choices: one list per input shape, [own (0 or 1), sizes...].
    using State = std::tuple<int64_t, at::Tensor, std::vector<at::Tensor>, std::vector<int64_t>,
                             std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, int64_t,
                             bool, std::string, std::vector<std::string>, std::vector<double>, bool,
                             std::vector<int64_t>, std::vector<std::vector<int64_t>>>;
    using StateV1 = std::tuple<int64_t, at::Tensor, std::vector<at::Tensor>, std::vector<int64_t>,
                               std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, int64_t,
                               bool, std::string, std::vector<std::string>, std::vector<double>, bool,
                               std::vector<int64_t>>;
    static constexpr int64_t kStateVersion = 2;

    // `weight` in PyTorch's layout (conv: O, I/G, k...; transposed: I, O/G, k...). `input_hint`
    // is the input shape to prepack for now ([] = a default); other shapes pack lazily.
    ConvolutionContext(at::Tensor weight, c10::optional<at::Tensor> bias, ConvParams params,
                       std::string dtype, PostOps post_ops, bool sum_in_place,
                       std::vector<int64_t> input_hint);

    // With a sum post-op and sum_in_place, the result is written into `other` itself when its
    // dtype, shape and layout allow and `may_write_other` (what ipex::convolution_sum_ passes;
    // the functional ipex::convolution_sum never writes its inputs).
    at::Tensor run(const at::Tensor &input, const c10::optional<at::Tensor> &other,
                   bool may_write_other = true) const;

    // run() of a batched input without a tensor post-op, written into `out`: channels-last and
    // dense, of the output's shape and the dtype run() returns (output_dtype()). How a
    // convolution writes its part of a batch straight into the whole batch's output.
    void run_into(const at::Tensor &input, const at::Tensor &out) const;
    int64_t in_channels() const { return params_.transposed ? weight_.size(0) : weight_.size(1) * params_.groups; }
    // The output sizes of a batched input's sizes (a size below 1 where the input is too small).
    std::vector<int64_t> output_sizes(at::IntArrayRef input) const;
    // The same for an input this convolution takes (its rank and channels, large enough for an
    // output); empty for any other.
    std::vector<int64_t> taken_output_sizes(at::IntArrayRef input) const;
    // The FLOPs of one call on an input of these sizes, batched or not: 2 x every output
    // (transposed: input) position x the weight's elements; 0 for sizes of another rank or a
    // too-small input. What the chain op weighs against memory traffic and bench --profile counts.
    int64_t flops(at::IntArrayRef input) const;
    // The same convolution without the taps that only ever read padding at this batched input's
    // spatial size (LiveTaps::cuts), which run() and run_into() then delegate to; nullptr when
    // no tap is cut. The cut taps would add zeros (oneDNN does not multiply the padding by the
    // weight either). Made once per spatial size, with its own
    // primitives and kernel choices (timed on its first call: not recorded in the model); the
    // last kMaxTrimSizes sizes are kept (trim_sizes()).
    c10::intrusive_ptr<ConvolutionContext> trimmed_for(at::IntArrayRef batched_input) const;
    static constexpr size_t kMaxTrimSizes = 16;
    size_t trim_sizes() const;

    // The dtype of run()'s output when no tensor post-op promotes it.
    at::ScalarType output_dtype() const { return compute_types(dtype_).output; }

    // The same convolution (sharing prepacked weights) with another dtype of the same math.
    c10::intrusive_ptr<ConvolutionContext> with_dtype(const std::string &dtype) const;

    // The same convolution (sharing prepacked weights) with more post-ops appended.
    c10::intrusive_ptr<ConvolutionContext> with_post_ops(const PostOps &extra, bool sum_in_place) const;

    State state() const;
    static c10::intrusive_ptr<ConvolutionContext> from_state(State state);
    // A pickled state of either version (what __setstate__ gets from a saved model).
    static c10::intrusive_ptr<ConvolutionContext> from_saved(const c10::IValue &state);

    // Where the context has an own kernel beside oneDNN's for 4-D inputs (the depthwise,
    // pointwise or grouped kernel, oneDNN's Winograd kernel, or the activation after the
    // convolution), which one runs an input
    // shape: as recorded for that shape (at optimize time, saved with the context), else timed
    // on its first call; IPEX_CONV_KERNELS=0 or 1 overrides both.
    bool has_kernel_choice() const {
        return depthwise_ != nullptr || pointwise_ != nullptr || grouped_ != nullptr || winograd_ != nullptr ||
               split_ != nullptr || stem_ != nullptr;
    }
    struct KernelChoice {
        std::vector<int64_t> input_sizes;
        bool own = false;
        double own_ms = 0, onednn_ms = 0;  // the best time of each (choose_kernel)
    };
    // Times both ways at `input_sizes` (random data; one warm-up call each, then `runs`
    // alternating calls), records the faster (oneDNN on a tie) and returns the timings; a shape
    // the Winograd kernel does not take records oneDNN's direct kernel untimed (timings 0).
    // Not to be called while another thread runs this context.
    KernelChoice choose_kernel(const std::vector<int64_t> &input_sizes, int runs);
    // Records `own` for an input shape (replacing what was recorded for it). Not to be called
    // while another thread runs this context.
    void record_kernel(const std::vector<int64_t> &input_sizes, bool own);
    const std::vector<std::pair<std::vector<int64_t>, bool>> &recorded_kernels() const { return recorded_; }

    const PostOps &post_ops() const { return post_ops_; }
    bool sum_in_place() const { return sum_in_place_; }
    const std::string &dtype() const { return dtype_; }
    const ConvParams &params() const { return params_; }
    int64_t spatial_dims() const { return weight_.dim() - 2; }
    at::IntArrayRef weight_sizes() const { return weight_.sizes(); }  // PyTorch's layout
    std::string describe() const;
    size_t cached_shapes() const { return primitives_->size(); }
    size_t packed_layouts() const { return weights_->layouts(); }
    // Whether 4-D inputs may run the own depthwise kernel (own_kernels.h) instead of oneDNN.
    bool has_depthwise_kernel() const { return depthwise_ != nullptr; }
    // Whether 4-D inputs may run the own pointwise (1x1, bf16 or fp32) kernel instead of oneDNN.
    bool has_pointwise_kernel() const { return pointwise_ != nullptr; }
    // Bytes of the pointwise kernel's own packed weight: 0 until the kernel first runs (or is
    // timed), so convolutions that always run oneDNN's way hold one packed weight only.
    size_t pointwise_weight_bytes() const;
    // Whether 4-D inputs may run the own grouped kernel (16, 32, ... outputs per group, or groups
    // of 2, 4 or 8 outputs taken 16 outputs at a time; one group only in fp32 without AVX-512).
    bool has_grouped_kernel() const { return grouped_ != nullptr; }
    bool has_stem_kernel() const { return stem_ != nullptr; }
    // Bytes of the grouped kernel's own packed weight: 0 until the kernel first runs (or is timed).
    size_t grouped_weight_bytes() const;
    // Whether 4-D inputs may run oneDNN's Winograd convolution (3x3, fp32, stride and dilation
    // 1, one group, AVX-512; conv_own_plans.h) instead of its direct one.
    bool has_winograd_kernel() const { return winograd_ != nullptr; }
    // Whether the Winograd kernel takes this batched input shape (oneDNN has one for it).
    bool winograd_takes(const std::vector<int64_t> &src_sizes) const;
    // Packed copies of the weights in Winograd layouts (at most 2, conv_own_plans.h).
    size_t winograd_layouts() const;
    // Whether the trailing activation may run after oneDNN's convolution, in the own kernel.
    bool has_split_activation() const { return split_ != nullptr; }

    // oneDNN's implementation for an input shape and output dtype ("jit_1x1:avx2") and how many
    // of the post-ops it fuses (the rest run with aten after it; see entry_for).
    std::pair<std::string, size_t> onednn_kernel(const std::vector<int64_t> &src_sizes, at::ScalarType dst_type) const;

private:
    struct Entry;
    std::shared_ptr<const Entry> entry_for(const std::vector<int64_t> &src_sizes, at::ScalarType dst_type,
                                           const std::vector<int64_t> &dst_sizes) const;
    // The entry of a transposed convolution run as GEMMs (conv_deconv_gemm.h), or nullptr where
    // oneDNN has no non-reference matmul for it (its deconvolution then runs).
    std::shared_ptr<Entry> gemm_entry(const std::vector<int64_t> &src_sizes, at::ScalarType dst_type) const;
    // The output sizes of x (batched `input`), after checking its channels and that it is large enough.
    std::vector<int64_t> checked_output_sizes(const at::Tensor &x, const at::Tensor &input) const;
    // conv + post-ops before the sum, then the sum and later post-ops with aten.
    at::Tensor run_unfused(const at::Tensor &x, const at::Tensor &other) const;
    // Sets the plan of the one own kernel that may compute this convolution (depthwise or
    // pointwise), else split_ when its trailing activation may run after oneDNN's
    // convolution (conv_own_plans.cpp).
    void plan_kernels();
    void plan_depthwise();
    void plan_pointwise();
    void plan_grouped();
    void plan_winograd();  // conv_winograd.cpp
    void plan_split();
    void plan_stem();
    // The own kernels and the split write src's convolution (channels-last, math dtype) into dst
    // (channels-last, dense, the output dtype).
    void run_depthwise(const at::Tensor &src, const at::Tensor &dst) const;
    // oneDNN's convolution of src into dst (channels-last, its dtype; holding the summand when
    // the post-ops have a sum).
    void execute_into(const at::Tensor &src, const at::Tensor &dst) const;
    void run_pointwise(const at::Tensor &src, const at::Tensor &dst) const;
    void run_grouped(const at::Tensor &src, const at::Tensor &dst) const;
    // src: fp32 planes (dense NCHW, the network's input as it comes) or channels-last bf16.
    void run_stem(const at::Tensor &src, const at::Tensor &dst) const;
    // Whether x is what run_stem reads without a conversion first: fp32 planes.
    bool stem_reads(const at::Tensor &x) const;
    // dst holds the summand when the post-ops have a sum.
    void run_winograd(const at::Tensor &src, const at::Tensor &dst) const;
    // The convolution without its trailing activation, then the activation in place.
    void run_split(const at::Tensor &src, const at::Tensor &dst) const;
    // Whether the own kernel this context has (depthwise, pointwise, grouped, Winograd, split or
    // stem; at most one) runs src's shape (times both on a shape's first call), and that kernel.
    // src is channels-last in the math dtype, or for a stem fp32 planes as well (stem_reads).
    bool own_for(const at::Tensor &src, const std::vector<int64_t> &dst_sizes) const;
    void run_own(const at::Tensor &src, const at::Tensor &dst) const;
    // A copy to change (post-ops, dtype): its own primitive cache, no recorded kernel choice.
    c10::intrusive_ptr<ConvolutionContext> changed_copy() const;
    // The recorded choice for an input shape, or nullptr.
    const bool *recorded_for(const CacheKey &src_sizes) const;

    at::Tensor weight_;  // as given (PyTorch layout)
    at::Tensor bias_;       // fp32 or undefined
    at::Tensor bias_bf16_;  // bias_ rounded to bf16 once, for bf16 outputs
    ConvParams params_;
    std::string dtype_;
    PostOps post_ops_;
    bool sum_in_place_ = false;
    std::vector<int64_t> input_hint_;
    std::shared_ptr<WeightCache> weights_;
    // A transposed convolution run as GEMMs: its weight in their layout (undefined otherwise).
    at::Tensor deconv_weight_;
    std::shared_ptr<PrimitiveCache<Entry>> primitives_;
    struct Depthwise;  // weights and post-ops as the own depthwise kernel takes them
    std::shared_ptr<const Depthwise> depthwise_;
    struct Pointwise;  // the packed weight, bias and post-ops of the own pointwise kernel
    std::shared_ptr<const Pointwise> pointwise_;
    struct Grouped;  // the packed weight, bias and geometry of the own grouped kernel
    std::shared_ptr<const Grouped> grouped_;
    struct Winograd;  // oneDNN's Winograd primitives per input shape
    std::shared_ptr<const Winograd> winograd_;
    struct Split;  // the convolution without its trailing activation, and that activation
    std::shared_ptr<const Split> split_;
    struct Stem;  // the own stem kernel's plan (own_stem.h)
    std::shared_ptr<const Stem> stem_;
    std::vector<std::pair<std::vector<int64_t>, bool>> recorded_;  // input shape -> own kernel
    struct TrimCache;  // trimmed_for's contexts per input spatial size
    // A new cache, or null where no input size can cut a tap (trimmed_for then takes no lock).
    static std::shared_ptr<TrimCache> new_trim_cache(const ConvParams &p, at::IntArrayRef weight_sizes);
    std::shared_ptr<TrimCache> trims_;
};

}  // namespace ipex::ops
