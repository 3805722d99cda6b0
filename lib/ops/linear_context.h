// A prepacked linear layer (y = x W^T + b over the last dim of x, any leading dims) as a oneDNN
// inner product: the weight reordered once, fused post-ops (elementwise, or a binary add/mul
// with a second tensor), primitives cached per row count. Pickles to the plain weight.
#pragma once

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <memory>
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

    // `weight` is [out_features, in_features]; `rows_hint` the rows (product of the leading
    // input dims) to prepack for now (0 = kDefaultRows).
    LinearContext(at::Tensor weight, c10::optional<at::Tensor> bias, std::string dtype, PostOps post_ops,
                  int64_t rows_hint);

    at::Tensor run(const at::Tensor &input, const c10::optional<at::Tensor> &other) const;

    c10::intrusive_ptr<LinearContext> with_post_ops(const PostOps &extra) const;

    State state() const;
    static c10::intrusive_ptr<LinearContext> from_state(State state);

    const PostOps &post_ops() const { return post_ops_; }
    const std::string &dtype() const { return dtype_; }
    int64_t in_features() const { return weight_.size(1); }
    int64_t out_features() const { return weight_.size(0); }
    std::string describe() const;
    size_t cached_shapes() const { return primitives_->size(); }

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
    PostOps post_ops_;
    int64_t rows_hint_ = 0;
    std::shared_ptr<WeightCache> weights_;
    std::shared_ptr<PrimitiveCache<Entry>> primitives_;
};

}  // namespace ipex::ops
