// Fused post-ops of a prepacked op: elementwise functions, a residual sum into the output,
// or a binary add/mul with a second tensor. Kept as plain data so contexts pickle to it.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <vector>

namespace ipex::ops {

struct PostOp {
    // relu, leaky_relu, clip (relu6/hardtanh/clamp), gelu_erf, gelu_tanh, silu, sigmoid, tanh,
    // hardswish, elu; sum (residual add into dst; alpha = scale); add, mul (binary, src_1).
    std::string kind;
    double alpha = 0.0;
    double beta = 0.0;

    bool takes_tensor() const { return kind == "sum" || kind == "add" || kind == "mul"; }
};

using PostOps = std::vector<PostOp>;

bool is_eltwise_kind(const std::string &kind);

// Throws (TORCH_CHECK) on an unknown kind: contexts loaded from files are validated.
void validate(const PostOps &ops);

// Index of the post-op taking a second tensor, or -1.
int tensor_post_op(const PostOps &ops);

// oneDNN post-ops; `other` describes the second tensor for a binary post-op.
dnnl::post_ops to_dnnl(const PostOps &ops, const dnnl::memory::desc &other);

// "relu", "sum(1)+relu", "clip(0,6)": for reports and debugging.
std::string describe(const PostOps &ops);

// Flattened form for pickling: kinds and (alpha, beta) pairs.
std::vector<std::string> kinds_of(const PostOps &ops);
std::vector<double> params_of(const PostOps &ops);
PostOps from_pickled(const std::vector<std::string> &kinds, const std::vector<double> &params);

}  // namespace ipex::ops

namespace at {
class Tensor;
}

namespace ipex::ops {

// The elementwise post-ops ops[from..] computed with aten (the unfused path taken when a
// second tensor broadcasts the output to a larger shape). Tensor post-ops are not allowed here.
at::Tensor apply_eltwise(at::Tensor y, const PostOps &ops, size_t from);

}  // namespace ipex::ops
