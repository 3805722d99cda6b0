#include "passes/to_channels_last.h"

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

constexpr int64_t kRank2d = 4;  // weight and batched input rank of 2-D convs
constexpr int64_t kRank3d = 5;
constexpr int64_t kProbeChannels = 4;
constexpr int64_t kProbeSpatial = 5;
constexpr int64_t kProbeKernel = 3;

c10::MemoryFormat format_for(int64_t rank) {
    return rank == kRank3d ? c10::MemoryFormat::ChannelsLast3d : c10::MemoryFormat::ChannelsLast;
}

std::optional<bool> transposed_flag(const Node *node) {
    const std::string kind = node->kind().toUnqualString();
    if (kind.rfind("conv_transpose", 0) == 0) return true;
    if (kind == "conv2d" || kind == "conv3d") return false;
    return constant_bool(input_named(node, "transposed"));
}

const std::vector<c10::Symbol> &conv_symbols() {
    static const std::vector<c10::Symbol> kinds = {
        c10::Symbol::aten("conv2d"),           c10::Symbol::aten("conv3d"),
        c10::Symbol::aten("conv_transpose2d"), c10::Symbol::aten("conv_transpose3d"),
        c10::Symbol::aten("_convolution"),     c10::Symbol::aten("convolution"),
    };
    return kinds;
}

// Copy with the exact channels-last strides. Tensor::contiguous(format) keeps a tensor that
// already passes the layout check, and a 1x1 kernel passes it with NCHW strides; oneDNN then
// picks NCHW for that conv and the layout stops flowing.
at::Tensor with_format(const at::Tensor &tensor, c10::MemoryFormat format) {
    return at::empty_like(tensor, tensor.options(), format).copy_(tensor);
}

bool has_format(const at::Tensor &tensor, c10::MemoryFormat format) {
    return tensor.strides() == at::empty_like(tensor, tensor.options(), format).strides();
}

bool probe(int64_t rank, bool transposed) {
    try {
        const int64_t spatial_dims = rank - 2;
        std::vector<int64_t> x_shape = {1, kProbeChannels};
        std::vector<int64_t> w_shape = {kProbeChannels, kProbeChannels};
        x_shape.insert(x_shape.end(), spatial_dims, kProbeSpatial);
        w_shape.insert(w_shape.end(), spatial_dims, kProbeKernel);
        const auto format = format_for(rank);
        const at::Tensor x = at::rand(x_shape).contiguous(format);
        const at::Tensor w = at::rand(w_shape).contiguous(format);
        const std::vector<int64_t> ones(spatial_dims, 1);
        const std::vector<int64_t> zeros(spatial_dims, 0);
        const at::Tensor y = at::convolution(x, w, {}, ones, zeros, ones, transposed, zeros, 1);
        return y.is_contiguous(format) && !y.is_contiguous();
    } catch (const c10::Error &) {
        return false;
    }
}

}  // namespace

bool conv_keeps_channels_last(int64_t weight_rank, bool transposed) {
    static const std::map<std::pair<int64_t, bool>, bool> answers = {
        {{kRank2d, false}, probe(kRank2d, false)},
        {{kRank2d, true}, probe(kRank2d, true)},
        {{kRank3d, false}, probe(kRank3d, false)},
        {{kRank3d, true}, probe(kRank3d, true)},
    };
    const auto it = answers.find({weight_rank, transposed});
    return it != answers.end() && it->second;
}

PassResult to_channels_last(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    struct Plan {
        Node *conv;
        int64_t rank;
    };
    std::vector<Plan> plans;
    for (Node *conv : collect_nodes_of_kind(graph->block(), conv_symbols())) {
        const std::string label = node_label(conv);
        const auto weight = constant_tensor(input_named(conv, "weight"));
        if (!weight || (weight->dim() != kRank2d && weight->dim() != kRank3d)) continue;
        const auto transposed = transposed_flag(conv);
        if (!transposed) {
            result.skipped.push_back(label + ": transposed flag is not a constant");
            continue;
        }
        if (!conv_keeps_channels_last(weight->dim(), *transposed)) {
            result.skipped.push_back(label + ": " + conv->kind().toQualString() + (*transposed ? " (transposed, " : " (") +
                                     std::to_string(weight->dim() - 2) +
                                     "-D) does not keep a channels-last layout in this libtorch; left contiguous");
            continue;
        }
        if (has_format(*weight, format_for(weight->dim()))) continue;  // converted already
        plans.push_back({conv, weight->dim()});
    }

    // Mutations start here: every check above has passed.
    std::unordered_map<const Value *, Value *> converted_weights;
    std::unordered_map<const Value *, Value *> converted_inputs;
    for (const auto &plan : plans) {
        Node *conv = plan.conv;
        const size_t weight_index = *input_index(conv, "weight");
        Value *weight = conv->input(weight_index);
        auto it = converted_weights.find(weight);
        if (it == converted_weights.end()) {
            const at::Tensor tensor = with_format(*constant_tensor(weight), format_for(plan.rank));
            Value *fresh = insert_constant_at_top(*graph, tensor, weight->node());
            const std::string path = module_path(conv);
            fresh->setDebugName((path.empty() ? std::string("conv") : path) + ".weight_channels_last");
            it = converted_weights.emplace(weight, fresh).first;
        }
        conv->replaceInput(weight_index, it->second);
        result.modules.push_back(node_label(conv));
        ++result.count;

        Value *x = conv->input(0);
        const auto rank = known_rank(x);
        if (x->node()->kind() != c10::prim::Param || x->node()->owningBlock() != graph->block() || !rank ||
            static_cast<int64_t>(*rank) != plan.rank)
            continue;
        auto entry = converted_inputs.find(x);
        if (entry == converted_inputs.end()) {
            torch::jit::WithInsertPoint at_start(graph->block()->param_node()->next());
            Value *format = graph->insertConstant(static_cast<int64_t>(format_for(plan.rank)));
            Node *contiguous = graph->insertNode(graph->create(c10::aten::contiguous, {x, format}));
            contiguous->output()->setType(rank_only_type(x->type()));
            entry = converted_inputs.emplace(x, contiguous->output()).first;
            ++result.count;
        }
        conv->replaceInput(0, entry->second);
    }
    result.changed = result.count > 0;
    return result;
}

}  // namespace ipex::passes
