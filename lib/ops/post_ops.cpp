#include "ops/post_ops.h"

#include <c10/util/Exception.h>

#include <map>
#include <sstream>

namespace ipex::ops {
namespace {

const std::map<std::string, dnnl::algorithm> &eltwise_algorithms() {
    static const std::map<std::string, dnnl::algorithm> table = {
        {"relu", dnnl::algorithm::eltwise_relu},
        {"leaky_relu", dnnl::algorithm::eltwise_relu},
        {"clip", dnnl::algorithm::eltwise_clip},
        {"gelu_erf", dnnl::algorithm::eltwise_gelu_erf},
        {"gelu_tanh", dnnl::algorithm::eltwise_gelu_tanh},
        {"silu", dnnl::algorithm::eltwise_swish},
        {"sigmoid", dnnl::algorithm::eltwise_logistic},
        {"tanh", dnnl::algorithm::eltwise_tanh},
        {"hardswish", dnnl::algorithm::eltwise_hardswish},
        {"elu", dnnl::algorithm::eltwise_elu},
    };
    return table;
}

}  // namespace

bool is_eltwise_kind(const std::string &kind) { return eltwise_algorithms().count(kind) > 0; }

void validate(const PostOps &ops) {
    int tensors = 0;
    for (const auto &op : ops) {
        TORCH_CHECK(is_eltwise_kind(op.kind) || op.takes_tensor(), "ipex ops: unknown post-op '",
                    op.kind, "'");
        tensors += op.takes_tensor();
    }
    TORCH_CHECK(tensors <= 1, "ipex ops: at most one post-op may take a second tensor");
}

int tensor_post_op(const PostOps &ops) {
    for (size_t i = 0; i < ops.size(); ++i)
        if (ops[i].takes_tensor()) return static_cast<int>(i);
    return -1;
}

dnnl::post_ops to_dnnl(const PostOps &ops, const dnnl::memory::desc &other) {
    dnnl::post_ops result;
    for (const auto &op : ops) {
        if (op.kind == "sum") {
            result.append_sum(static_cast<float>(op.alpha));
        } else if (op.kind == "add") {
            result.append_binary(dnnl::algorithm::binary_add, other);
        } else if (op.kind == "mul") {
            result.append_binary(dnnl::algorithm::binary_mul, other);
        } else {
            float alpha = static_cast<float>(op.alpha), beta = static_cast<float>(op.beta);
            if (op.kind == "silu") alpha = 1.f;
            result.append_eltwise(1.f, eltwise_algorithms().at(op.kind), alpha, beta);
        }
    }
    return result;
}

std::string describe(const PostOps &ops) {
    std::ostringstream out;
    for (size_t i = 0; i < ops.size(); ++i) {
        const auto &op = ops[i];
        out << (i ? "+" : "") << op.kind;
        if (op.kind == "clip") out << "(" << op.alpha << "," << op.beta << ")";
        if (op.kind == "leaky_relu" || op.kind == "elu") out << "(" << op.alpha << ")";
        if (op.kind == "sum" && op.alpha != 1.0) out << "(" << op.alpha << ")";
    }
    return out.str();
}

std::vector<std::string> kinds_of(const PostOps &ops) {
    std::vector<std::string> kinds;
    for (const auto &op : ops) kinds.push_back(op.kind);
    return kinds;
}

std::vector<double> params_of(const PostOps &ops) {
    std::vector<double> params;
    for (const auto &op : ops) {
        params.push_back(op.alpha);
        params.push_back(op.beta);
    }
    return params;
}

PostOps from_pickled(const std::vector<std::string> &kinds, const std::vector<double> &params) {
    TORCH_CHECK(params.size() == 2 * kinds.size(), "ipex ops: post-op parameters do not match (",
                kinds.size(), " kinds, ", params.size(), " parameters)");
    PostOps ops;
    for (size_t i = 0; i < kinds.size(); ++i) ops.push_back({kinds[i], params[2 * i], params[2 * i + 1]});
    validate(ops);
    return ops;
}

}  // namespace ipex::ops

#include <ATen/ATen.h>

namespace ipex::ops {

at::Tensor apply_eltwise(at::Tensor y, const PostOps &ops, size_t from) {
    for (size_t i = from; i < ops.size(); ++i) {
        const PostOp &op = ops[i];
        if (op.kind == "relu") y = at::relu(y);
        else if (op.kind == "leaky_relu") y = at::leaky_relu(y, op.alpha);
        else if (op.kind == "clip") y = at::clamp(y, op.alpha, op.beta);
        else if (op.kind == "gelu_erf") y = at::gelu(y, "none");
        else if (op.kind == "gelu_tanh") y = at::gelu(y, "tanh");
        else if (op.kind == "silu") y = at::silu(y);
        else if (op.kind == "sigmoid") y = at::sigmoid(y);
        else if (op.kind == "tanh") y = at::tanh(y);
        else if (op.kind == "hardswish") y = at::hardswish(y);
        else if (op.kind == "elu") y = at::elu(y, op.alpha);
        else TORCH_CHECK(false, "ipex ops: post-op '", op.kind, "' is not elementwise");
    }
    return y;
}

}  // namespace ipex::ops
