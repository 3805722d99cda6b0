#include "ir/op_kinds.h"

#include <algorithm>
#include <unordered_map>

namespace ipex::ir {
namespace {

const std::unordered_map<std::string, OpKind> &kind_table() {
    static const std::unordered_map<std::string, OpKind> table = {
        {"ipex::convolution", OpKind::kConvolution},
        {"ipex::convolution_sum", OpKind::kConvolution},
        {"ipex::convolution_sum_", OpKind::kConvolution},
        {"ipex::convolution_chain", OpKind::kConvolution},
        {"ipex::convolution_max_pool", OpKind::kConvolution},
        {"ipex::convolution_graph", OpKind::kConvolution},
        {"ipex::int8_graph", OpKind::kConvolution},
        {"ipex::int8_conv_max_pool", OpKind::kConvolution},
        {"ipex::linear", OpKind::kLinear},
        {"ipex::linear_binary", OpKind::kLinear},
        {"ipex::woq_linear", OpKind::kLinear},
        {"ipex::matmul", OpKind::kMatmul},
        {"ipex::attention", OpKind::kAttention},
        {"ipex::lstm", OpKind::kRecurrent},
        {"ipex::gru", OpKind::kRecurrent},
        {"ipex::int8_op", OpKind::kOther},  // conv or linear: decided by the context
        {"ipex::int8_op_sum", OpKind::kOther},
        {"aten::conv1d", OpKind::kConvolution},
        {"aten::conv2d", OpKind::kConvolution},
        {"aten::conv3d", OpKind::kConvolution},
        {"aten::convolution", OpKind::kConvolution},
        {"aten::_convolution", OpKind::kConvolution},
        {"aten::conv_transpose1d", OpKind::kConvolution},
        {"aten::conv_transpose2d", OpKind::kConvolution},
        {"aten::conv_transpose3d", OpKind::kConvolution},
        {"aten::linear", OpKind::kLinear},
        {"aten::matmul", OpKind::kMatmul},
        {"aten::mm", OpKind::kMatmul},
        {"aten::bmm", OpKind::kMatmul},
        {"aten::addmm", OpKind::kMatmul},
        {"aten::baddbmm", OpKind::kMatmul},
        };
    return table;
}

}  // namespace

const char *op_kind_name(OpKind kind) {
    switch (kind) {
    case OpKind::kConvolution: return "conv";
    case OpKind::kLinear: return "linear";
    case OpKind::kMatmul: return "matmul";
    case OpKind::kAttention: return "attention";
    case OpKind::kRecurrent: return "rnn";
    case OpKind::kOther: break;
    }
    return "other";
}

OpKind op_kind(const std::string &name) {
    const auto it = kind_table().find(name);
    return it == kind_table().end() ? OpKind::kOther : it->second;
}

const std::vector<c10::Symbol> &aten_conv_kinds() {
    static const std::vector<c10::Symbol> kinds = [] {
        std::vector<c10::Symbol> out;
        for (const auto &[name, kind] : kind_table())
            if (kind == OpKind::kConvolution && name.rfind("aten::", 0) == 0)
                out.push_back(c10::Symbol::fromQualString(name));
        std::sort(out.begin(), out.end(), [](c10::Symbol a, c10::Symbol b) {
            return std::string(a.toQualString()) < std::string(b.toQualString());
        });
        return out;
    }();
    return kinds;
}

bool is_aten_conv(c10::Symbol kind) {
    const auto &kinds = aten_conv_kinds();
    return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

}  // namespace ipex::ir
