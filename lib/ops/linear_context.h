// A prepacked linear layer (y = x W^T + b over the last dim of x, any leading dims) as a oneDNN
// matmul: the weight reordered once (one packed copy whatever the shapes it is fed; for the
// gemm-based matmul its rows padded to an odd number of cache lines),
// fused post-ops (elementwise, or a binary add/mul with a second tensor), primitives cached per
// row count or row bucket (RowBuckets), at most kMaxPrimitives. Pickles to the plain weight.
// Where oneDNN has no bf16 matmul (CPUs without AVX-512), a bf16 (or bf32) linear is widened: its
// weight and input are rounded to bf16 and multiplied by the fp32 matmul, the post-ops applied in
// fp32 and the result rounded to the output dtype once: the products a bf16 kernel forms (a
// product of two bf16 values is exact in fp32), accumulated in fp32, at fp32 speed, where
// libtorch's bf16 linear runs reference loops tens of times slower. The state is the same, so
// a model written here runs the native bf16 kernel on a CPU that has one.
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
#include "ops/weight_cache.h"

namespace ipex::ops {

class LinearContext : public torch::CustomClassHolder {
public:
    using State = std::tuple<int64_t, at::Tensor, std::vector<at::Tensor>, std::string,
                             std::vector<std::string>, std::vector<double>, int64_t>;
    static constexpr int64_t kStateVersion = 1;
    // Rows to prepack for when the caller gives no batch size.
    static constexpr int64_t kDefaultRows = 1;
    // Primitives kept per context (least recently used dropped): covers the exact row counts
    // and the buckets a model fed many sequence lengths uses.
    static constexpr size_t kMaxPrimitives = 64;

    // `weight` is [out_features, in_features]; `rows_hint` the rows (product of the leading
    // input dims) to prepack for now (0 = kDefaultRows). With `weight_in_place` no packed copy
    // is made where oneDNN has a non-reference implementation reading the plain weight: the
    // weight, contiguous in the math dtype (the caller's tensor when it already is, else its
    // converted copy, which then replaces it), is the only copy (the runtime of LLMs, whose
    // weights are most of the memory). Not part of the state.
    LinearContext(at::Tensor weight, c10::optional<at::Tensor> bias, std::string dtype, PostOps post_ops,
                  int64_t rows_hint, bool weight_in_place = false);

    at::Tensor run(const at::Tensor &input, const c10::optional<at::Tensor> &other) const;

    c10::intrusive_ptr<LinearContext> with_post_ops(const PostOps &extra) const;
    // The same linear (sharing prepacked weights) with another dtype of the same math.
    c10::intrusive_ptr<LinearContext> with_dtype(const std::string &dtype) const;

    State state() const;
    static c10::intrusive_ptr<LinearContext> from_state(State state);

    const PostOps &post_ops() const { return post_ops_; }
    // A bf16/bf32 linear run by the fp32 matmul on bf16-rounded operands (see above).
    bool widened() const { return widened_; }
    const std::string &dtype() const { return dtype_; }
    int64_t in_features() const { return weight_.size(1); }
    int64_t out_features() const { return weight_.size(0); }
    std::string describe() const;
    size_t cached_shapes() const { return primitives_->size(); }
    size_t packed_layouts() const { return weights_->layouts(); }
    // Bytes of weight copies held besides the plain weight (0: read in place).
    int64_t packed_bytes() const { return weights_->packed_bytes(); }

private:
    struct Entry;
    // other_kind: "" (no tensor), "row" ([N] broadcast over rows), "full" ([M, N]).
    std::shared_ptr<const Entry> entry_for(int64_t rows, at::ScalarType dst_type, const std::string &other_kind,
                                           at::ScalarType other_type) const;

    // linear + post-ops before the binary one, then the rest with aten.
    at::Tensor run_unfused(const at::Tensor &input, const at::Tensor &other) const;

    at::Tensor weight_;
    at::Tensor bias_;  // fp32 or undefined
    std::string dtype_;
    bool widened_ = false;
    at::ScalarType math_ = at::kFloat;  // of the primitive's src and weights
    PostOps post_ops_;
    int64_t rows_hint_ = 0;
    std::shared_ptr<WeightCache> weights_;
    std::shared_ptr<PrimitiveCache<Entry, kMaxPrimitives>> primitives_;
    std::shared_ptr<RowBuckets> buckets_;
    // The linear with the post-ops before a binary one aten has to apply, built at its first use.
    struct Unfused {
        std::mutex mutex;
        c10::intrusive_ptr<LinearContext> prefix;
    };
    std::shared_ptr<Unfused> unfused_;
    // Fresh caches for a copy that differs in dtype or post-ops (the packed weights are shared).
    void reset_caches();
};

}  // namespace ipex::ops
