#include "passes/lowp_op_tables.h"

#include "ir/op_kinds.h"

#include <ATen/ATen.h>

#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "base/errors.h"
#include "core/run_errors.h"

namespace ipex::passes {
namespace {

using Table = std::unordered_map<c10::Symbol, LowpOpInfo>;

// Largest relative error a probe accepts from a low-precision kernel.
constexpr double kProbeTolerance = 0.05;

// Compute-bound ops worth running in the low dtype (CPU autocast's lower-precision list).
constexpr const char *kLowpOps[] = {
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "_convolution", "convolution", "linear", "matmul", "mm", "bmm", "addmm", "baddbmm",
    "addbmm", "embedding", "embedding_bag",
};

// Numerically sensitive (softmax, norms, reductions that accumulate, losses), or without a
// bf16 CPU kernel in libtorch 1.13 (3-D pooling, grid_sampler, prod), or with fp32 weights
// that must match the input dtype (recurrent layers).
constexpr const char *kFp32Ops[] = {
    "softmax", "log_softmax", "_softmax", "_log_softmax", "layer_norm", "native_layer_norm",
    "group_norm", "native_group_norm", "batch_norm", "native_batch_norm", "instance_norm",
    "sum", "nansum", "mean", "nanmean", "prod", "norm", "frobenius_norm", "nuclear_norm",
    "linalg_vector_norm", "linalg_matrix_norm", "linalg_norm", "renorm", "var", "std",
    "var_mean", "std_mean", "cumsum", "cumprod", "logcumsumexp", "logsumexp", "dist", "cdist",
    "pdist", "cosine_similarity", "pairwise_distance", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "nll_loss", "nll_loss_nd", "nll_loss2d", "cross_entropy_loss", "kl_div", "poisson_nll_loss",
    "soft_margin_loss", "multilabel_margin_loss", "multi_margin_loss", "margin_ranking_loss",
    "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss", "ctc_loss",
    "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "avg_pool3d", "max_pool3d",
    "max_pool3d_with_indices", "adaptive_max_pool3d", "fractional_max_pool2d", "lstm", "gru",
    "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "quantile", "nanquantile", "erfinv", "polar", "stft", "istft",
};

struct AnyOp {
    const char *name;
    OutputRule rule;
};

// Ops with bf16 CPU kernels that keep (or promote) the dtype of their operands.
constexpr AnyOp kAnyOps[] = {
    // activations and pointwise math
    {"relu", OutputRule::same}, {"relu_", OutputRule::same}, {"relu6", OutputRule::same},
    {"gelu", OutputRule::same}, {"gelu_", OutputRule::same}, {"silu", OutputRule::same},
    {"silu_", OutputRule::same}, {"sigmoid", OutputRule::same}, {"sigmoid_", OutputRule::same},
    {"tanh", OutputRule::same}, {"tanh_", OutputRule::same}, {"hardswish", OutputRule::same},
    {"hardswish_", OutputRule::same}, {"hardsigmoid", OutputRule::same},
    {"hardsigmoid_", OutputRule::same}, {"hardtanh", OutputRule::same},
    {"hardtanh_", OutputRule::same}, {"leaky_relu", OutputRule::same},
    {"leaky_relu_", OutputRule::same}, {"elu", OutputRule::same}, {"elu_", OutputRule::same},
    {"selu", OutputRule::same}, {"celu", OutputRule::same},
    {"softplus", OutputRule::same}, {"threshold", OutputRule::same},
    {"threshold_", OutputRule::same}, {"clamp", OutputRule::promote},
    {"clamp_", OutputRule::same}, {"clamp_min", OutputRule::same},
    {"clamp_max", OutputRule::same}, {"clip", OutputRule::promote}, {"neg", OutputRule::same},
    {"abs", OutputRule::same}, {"sqrt", OutputRule::same}, {"rsqrt", OutputRule::same},
    {"exp", OutputRule::same}, {"log", OutputRule::same}, {"sin", OutputRule::same},
    {"cos", OutputRule::same}, {"erf", OutputRule::same}, {"reciprocal", OutputRule::same},
    {"square", OutputRule::promote}, {"floor", OutputRule::same}, {"ceil", OutputRule::same},
    {"round", OutputRule::same}, {"sign", OutputRule::same}, {"trunc", OutputRule::same},
    {"dropout", OutputRule::same}, {"dropout_", OutputRule::same},
    {"feature_dropout", OutputRule::same}, {"alpha_dropout", OutputRule::same},
    {"feature_alpha_dropout", OutputRule::same},
    // binary and ternary ops with type promotion
    {"add", OutputRule::promote}, {"add_", OutputRule::same}, {"sub", OutputRule::promote},
    {"sub_", OutputRule::same}, {"rsub", OutputRule::promote}, {"mul", OutputRule::promote},
    {"mul_", OutputRule::same}, {"div", OutputRule::promote}, {"div_", OutputRule::same},
    {"true_divide", OutputRule::promote}, {"floor_divide", OutputRule::promote},
    {"pow", OutputRule::promote}, {"remainder", OutputRule::promote},
    {"fmod", OutputRule::promote}, {"maximum", OutputRule::promote},
    {"minimum", OutputRule::promote}, {"where", OutputRule::promote},
    {"addcmul", OutputRule::promote}, {"addcdiv", OutputRule::promote},
    {"masked_fill", OutputRule::same}, {"masked_fill_", OutputRule::same},
    {"cat", OutputRule::promote}, {"stack", OutputRule::promote},
    {"copy_", OutputRule::same}, {"fill_", OutputRule::same}, {"zero_", OutputRule::same},
    // comparisons
    {"eq", OutputRule::boolean}, {"ne", OutputRule::boolean}, {"lt", OutputRule::boolean},
    {"le", OutputRule::boolean}, {"gt", OutputRule::boolean}, {"ge", OutputRule::boolean},
    {"isnan", OutputRule::boolean}, {"isinf", OutputRule::boolean},
    {"isfinite", OutputRule::boolean}, {"logical_not", OutputRule::boolean},
    {"logical_and", OutputRule::boolean}, {"logical_or", OutputRule::boolean},
    // reductions that are exact in any dtype
    {"max", OutputRule::values_indices}, {"min", OutputRule::values_indices},
    {"amax", OutputRule::same}, {"amin", OutputRule::same},
    {"topk", OutputRule::values_indices}, {"sort", OutputRule::values_indices},
    {"argmax", OutputRule::indices}, {"argmin", OutputRule::indices},
    {"argsort", OutputRule::indices},
    // pooling, resampling
    {"max_pool1d", OutputRule::same}, {"max_pool2d", OutputRule::same},
    {"max_pool2d_with_indices", OutputRule::values_indices}, {"avg_pool1d", OutputRule::same},
    {"avg_pool2d", OutputRule::same}, {"adaptive_avg_pool1d", OutputRule::same},
    {"adaptive_avg_pool2d", OutputRule::same}, {"adaptive_avg_pool3d", OutputRule::same},
    {"adaptive_max_pool1d", OutputRule::values_indices},
    {"adaptive_max_pool2d", OutputRule::values_indices},
    {"upsample_nearest1d", OutputRule::same}, {"upsample_nearest2d", OutputRule::same},
    {"upsample_nearest3d", OutputRule::same}, {"upsample_linear1d", OutputRule::same},
    {"upsample_bilinear2d", OutputRule::same}, {"upsample_bicubic2d", OutputRule::same},
    {"upsample_trilinear3d", OutputRule::same}, {"pixel_shuffle", OutputRule::same},
    {"pixel_unshuffle", OutputRule::same}, {"channel_shuffle", OutputRule::same},
    {"constant_pad_nd", OutputRule::same},
    // shape and indexing
    {"flatten", OutputRule::same}, {"unflatten", OutputRule::same}, {"view", OutputRule::same},
    {"view_as", OutputRule::same}, {"reshape", OutputRule::same},
    {"reshape_as", OutputRule::same}, {"permute", OutputRule::same},
    {"transpose", OutputRule::same}, {"transpose_", OutputRule::same}, {"t", OutputRule::same},
    {"contiguous", OutputRule::same}, {"squeeze", OutputRule::same},
    {"squeeze_", OutputRule::same}, {"unsqueeze", OutputRule::same},
    {"unsqueeze_", OutputRule::same}, {"expand", OutputRule::same},
    {"expand_as", OutputRule::same}, {"repeat", OutputRule::same}, {"slice", OutputRule::same},
    {"select", OutputRule::same}, {"narrow", OutputRule::same},
    {"index_select", OutputRule::same}, {"gather", OutputRule::same},
    {"index", OutputRule::same}, {"masked_select", OutputRule::same},
    {"flip", OutputRule::same}, {"roll", OutputRule::same}, {"chunk", OutputRule::same},
    {"split", OutputRule::same}, {"split_with_sizes", OutputRule::same},
    {"unbind", OutputRule::same}, {"tensor_split", OutputRule::same},
    {"clone", OutputRule::same}, {"detach", OutputRule::same}, {"triu", OutputRule::same},
    {"tril", OutputRule::same}, {"diagonal", OutputRule::same}, {"unfold", OutputRule::same},
    {"movedim", OutputRule::same}, {"swapaxes", OutputRule::same},
    {"zeros_like", OutputRule::same}, {"ones_like", OutputRule::same},
    {"empty_like", OutputRule::same}, {"full_like", OutputRule::same},
    {"new_zeros", OutputRule::same}, {"new_ones", OutputRule::same},
    {"new_full", OutputRule::same}, {"new_empty", OutputRule::same},
    // conversions and metadata
    {"to", OutputRule::to}, {"type_as", OutputRule::type_as}, {"size", OutputRule::no_tensor},
    {"dim", OutputRule::no_tensor}, {"numel", OutputRule::no_tensor},
    {"stride", OutputRule::no_tensor}, {"is_contiguous", OutputRule::no_tensor},
    {"is_floating_point", OutputRule::no_tensor}, {"len", OutputRule::no_tensor},
    {"item", OutputRule::no_tensor}, {"Float", OutputRule::no_tensor},
    {"Int", OutputRule::no_tensor}, {"Bool", OutputRule::no_tensor},
    {"ScalarImplicit", OutputRule::no_tensor}, {"__getitem__", OutputRule::same},
    {"__is__", OutputRule::no_tensor}, {"__isnot__", OutputRule::no_tensor},
    {"format", OutputRule::no_tensor}, {"warn", OutputRule::no_tensor},
    {"append", OutputRule::no_tensor}, {"list", OutputRule::same},
};

c10::Symbol aten(const char *name) { return c10::Symbol::aten(name); }

Table build_table() {
    Table table;
    for (const char *name : kLowpOps) table[aten(name)] = {LowpCategory::lowp, OutputRule::promote};
    table[aten("embedding_bag")].rule = OutputRule::values_indices;
    for (const char *name : kFp32Ops) table[aten(name)] = {LowpCategory::fp32, OutputRule::reduce};
    for (const auto &op : kAnyOps) table[aten(op.name)] = {LowpCategory::any, op.rule};
    // Our fused attention: query, key and value in the low dtype (cast_to_lowp leaves its mask
    // and bias alone); the output has the query's dtype.
    table[c10::Symbol::fromQualString("ipex::attention")] = {LowpCategory::lowp, OutputRule::same};
    // Our RoIAlign (replace_torchvision_ops): bf16 feature maps read as they are, fp32 boxes; the
    // output has the feature map's dtype.
    table[c10::Symbol::fromQualString("ipex::roi_align")] = {LowpCategory::any, OutputRule::same};
    // Our layer norms: fp32 statistics on operands of any floating dtype; the output has the
    // dtype of input + other (fuse_layer_norm), the weight and bias do not promote.
    for (const char *name : {"ipex::layer_norm", "ipex::add_layer_norm"})
        table[c10::Symbol::fromQualString(name)] = {LowpCategory::any, OutputRule::promote_values};
    // Outputs of these fp32 ops are values plus int64 indices.
    for (const char *name : {"max_pool3d_with_indices", "adaptive_max_pool3d", "fractional_max_pool2d"})
        table[aten(name)].rule = OutputRule::values_indices;
    return table;
}

double relative_error(const at::Tensor &got, const at::Tensor &want) {
    const double norm = want.norm().item<double>();
    return (got.to(at::kFloat) - want).norm().item<double>() / (norm > 0 ? norm : 1.0);
}

}  // namespace

const LowpOpInfo *lowp_op_info(c10::Symbol kind) {
    static const Table table = build_table();
    const auto it = table.find(kind);
    return it == table.end() ? nullptr : &it->second;
}

bool lowp_dtype_runnable(at::ScalarType dtype, std::string *why) {
    try {
        const auto options = at::TensorOptions().dtype(dtype);
        at::relu(at::linear(at::ones({2, 4}, options), at::ones({3, 4}, options)));
        at::conv2d(at::ones({1, 2, 4, 4}, options), at::ones({2, 2, 3, 3}, options));
    } catch (const c10::Error &e) {
        *why = readable_error(e);
        return false;
    }
    return true;
}

bool lowp_conv_transpose_ok(at::ScalarType dtype) {
    try {
        // Unequal in/out channels and groups: the 1.13 bf16 path confuses the two.
        const at::Tensor x = at::linspace(-1, 1, 2 * 4 * 5 * 5).reshape({2, 4, 5, 5});
        const at::Tensor w = at::linspace(-1, 1, 4 * 3 * 3 * 3).reshape({4, 3, 3, 3});
        const int64_t groups = 2;
        const at::Tensor want = at::conv_transpose2d(x, w, {}, 1, 0, 0, groups);
        const at::Tensor got = at::conv_transpose2d(x.to(dtype), w.to(dtype), {}, 1, 0, 0, groups);
        return got.sizes() == want.sizes() && relative_error(got, want) < kProbeTolerance;
    } catch (const c10::Error &) {
        return false;
    }
}

bool lowp_embedding_bag_ok(at::ScalarType dtype) {
    try {
        const at::Tensor weight = at::linspace(-1, 1, 5 * 3).reshape({5, 3});
        const at::Tensor indices = at::arange(4, at::kLong).reshape({2, 2});
        const at::Tensor offsets;
        const auto want = at::embedding_bag(weight, indices, offsets);
        const auto got = at::embedding_bag(weight.to(dtype), indices, offsets);
        return relative_error(std::get<0>(got), std::get<0>(want)) < kProbeTolerance;
    } catch (const c10::Error &) {
        return false;
    }
}

bool lowp_batch_norm_mixed_ok(at::ScalarType dtype) {
    try {
        const int64_t c = 5;
        const at::Tensor weight = at::linspace(0.5, 1.5, c), bias = at::linspace(-1, 1, c);
        const at::Tensor mean = at::linspace(-0.2, 0.3, c), var = at::linspace(0.5, 2, c);
        for (const std::vector<int64_t> &shape :
             std::vector<std::vector<int64_t>>{{3, c}, {2, c, 7}, {2, c, 4, 3}, {2, c, 3, 2, 2}}) {
            int64_t n = 1;
            for (int64_t d : shape) n *= d;
            const at::Tensor x = at::linspace(-2, 2, n).reshape(shape);
            std::vector<at::Tensor> inputs{x};
            if (shape.size() == 4) inputs.push_back(x.contiguous(at::MemoryFormat::ChannelsLast));
            if (shape.size() == 5) inputs.push_back(x.contiguous(at::MemoryFormat::ChannelsLast3d));
            for (const at::Tensor &in : inputs) {
                const at::Tensor want = at::batch_norm(in, weight, bias, mean, var, false, 0.1, 1e-5, true);
                const at::Tensor got = at::batch_norm(in.to(dtype), weight, bias, mean, var, false, 0.1, 1e-5, true);
                if (got.scalar_type() != dtype || got.sizes() != want.sizes() ||
                    relative_error(got, want) >= kProbeTolerance)
                    return false;
            }
        }
        return true;
    } catch (const c10::Error &) {
        return false;
    }
}

}  // namespace ipex::passes
