#include "passes/split_cat_conv.h"

#include <optional>
#include <vector>

#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// The constant weight of a 2-D convolution that is not transposed; nothing for any other node.
std::optional<at::Tensor> conv2d_weight(const Node *node) {
    if (conv_transposed(node) != std::optional<bool>(false)) return std::nullopt;
    const Value *weight_value = input_named(node, "weight");
    auto weight = weight_value ? constant_tensor(weight_value) : std::nullopt;
    if (!weight || weight->dim() != 4) return std::nullopt;
    return weight;
}

bool all_equal(const std::optional<std::vector<int64_t>> &v, int64_t x) {
    if (!v || v->empty()) return false;
    for (int64_t e : *v)
        if (e != x) return false;
    return true;
}

// The constant weight of a 2-D, 1x1, stride-1, unpadded, one-group, not transposed
// convolution reading `input` as its input; nothing for any other node.
std::optional<at::Tensor> pointwise_weight(const Node *conv, const Value *input) {
    if (conv->input(0) != input) return std::nullopt;
    const auto weight = conv2d_weight(conv);
    if (!weight || !weight->is_floating_point() || weight->size(2) != 1 || weight->size(3) != 1) return std::nullopt;
    if (constant_int(input_named(conv, "groups")) != std::optional<int64_t>(1)) return std::nullopt;
    if (!all_equal(constant_int_list(input_named(conv, "stride")), 1) ||
        !all_equal(constant_int_list(input_named(conv, "padding")), 0))
        return std::nullopt;
    return weight;
}

// Channels (dim 1) of `v`: from its type, or from the convolution that makes it, through the
// per-channel ops in between and the sums of equal channels.
std::optional<int64_t> known_channels(const Value *v) {
    for (int depth = 0; depth < 8; ++depth) {
        if (const auto t = v->type()->cast<c10::TensorType>()) {
            const auto sizes = t->sizes().concrete_sizes();
            if (sizes && sizes->size() >= 2) return (*sizes)[1];
        }
        const Node *node = v->node();
        const auto k = node->kind();
        if (is_aten_conv(node)) {
            const auto weight = conv2d_weight(node);
            return weight ? std::optional<int64_t>(weight->size(0)) : std::nullopt;
        }
        if (k == c10::aten::add || k == c10::aten::add_) {  // a sum of two such values (a split convolution's)
            if (node->inputs().size() != 3 || !node->input(1)->type()->cast<c10::TensorType>()) return std::nullopt;
            const auto a = known_channels(node->input(0)), b = known_channels(node->input(1));
            return a && a == b ? a : std::nullopt;
        }
        if (k != c10::aten::relu && k != c10::aten::relu_ && !node->matches(kAtenMaxPool2dSchema)) return std::nullopt;
        v = node->input(0);
    }
    return std::nullopt;
}

struct Plan {
    std::vector<Node *> convs;  // reading the cat
    std::vector<Node *> pools;  // max pools reading the cat, read only by convs
};

// Splits `conv` over `parts` (channels `channels`, inserted before it), sums the results.
void split_conv(torch::jit::Graph &graph, Node *conv, const std::vector<Value *> &parts,
                const std::vector<int64_t> &channels) {
    const at::Tensor weight = *constant_tensor(input_named(conv, "weight"));
    const size_t weight_index = *input_index(conv, "weight"), bias_index = *input_index(conv, "bias");
    Value *none = nullptr;
    Value *sum = nullptr;
    int64_t offset = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
        const at::Tensor slice =
            weight.slice(1, offset, offset + channels[i]).contiguous(weight.suggest_memory_format());
        offset += channels[i];
        Node *piece = graph.createClone(conv, [](Value *v) { return v; });
        piece->insertBefore(conv);
        piece->replaceInput(0, parts[i]);
        piece->replaceInput(weight_index, insert_constant_at_top(graph, slice, conv));
        if (i > 0) {
            if (!none) none = insert_constant_at_top(graph, c10::IValue(), conv);
            piece->replaceInput(bias_index, none);
        }
        piece->output()->setType(conv->output()->type());
        copy_origin(piece, conv);
        if (!sum) {
            sum = piece->output();
            continue;
        }
        Node *add = graph.create(c10::aten::add, {piece->output(), sum, insert_constant_at_top(graph, int64_t(1), conv)});
        add->insertBefore(conv);
        add->output()->setType(conv->output()->type());
        copy_origin(add, conv);
        sum = add->output();
    }
    conv->output()->replaceAllUsesWith(sum);
    conv->destroy();
}

}  // namespace

PassResult split_cat_conv(std::shared_ptr<torch::jit::Graph> &graph) {
    PassResult result;
    int convs_split = 0, pools_split = 0;
    for (Node *cat : collect_nodes_of_kind(graph->block(), {c10::aten::cat})) {
        if (!cat->matches(kAtenCatSchema) || constant_int(cat->input(1)) != std::optional<int64_t>(1)) continue;
        Node *list = cat->input(0)->node();
        if (list->kind() != c10::prim::ListConstruct || list->inputs().size() < 2) continue;
        Value *out = cat->output();
        if (is_graph_output(out) || out->uses().empty()) continue;
        Plan plan;
        bool splittable = true;
        for (const auto &use : out->uses()) {
            Node *user = use.user;
            if (pointwise_weight(user, out)) {
                plan.convs.push_back(user);
            } else if (user->matches(kAtenMaxPool2dSchema) && use.offset == 0 &&
                       user->owningBlock() == cat->owningBlock() && !is_graph_output(user->output()) &&
                       !user->output()->uses().empty()) {
                for (const auto &pool_use : user->output()->uses())
                    splittable = splittable && pointwise_weight(pool_use.user, user->output()).has_value();
                plan.pools.push_back(user);
            } else {
                splittable = false;
            }
        }
        if (!splittable) continue;
        const auto parts = list->inputs().vec();
        std::vector<int64_t> channels;
        int64_t in_channels = 0;
        for (Value *part : parts) {
            const auto c = known_channels(part);
            if (!c || *c <= 0) break;
            channels.push_back(*c);
            in_channels += *c;
        }
        const std::string label = node_label(cat);
        if (channels.size() != parts.size()) {
            result.skipped.push_back(label + ": the channels of a concatenated part are not known");
            continue;
        }
        std::vector<Node *> all_convs = plan.convs;
        for (Node *pool : plan.pools)
            for (const auto &use : pool->output()->uses()) all_convs.push_back(use.user);
        // The cat's write and read (2 x in_channels per pixel) against the sums' extra read and
        // write of each output for each part but the first.
        bool fits = true;
        int64_t out_channels = 0;
        for (Node *conv : all_convs) {
            const at::Tensor w = *constant_tensor(input_named(conv, "weight"));
            fits = fits && w.size(1) == in_channels;
            out_channels += w.size(0);
        }
        const bool narrow = static_cast<int64_t>(parts.size() - 1) * out_channels < in_channels;
        if (!fits) {
            result.skipped.push_back(label + ": a convolution's input channels differ from the concatenation's");
            continue;
        }
        if (!narrow) {
            result.skipped.push_back(label + ": the split convolutions would write more than the concatenation");
            continue;
        }
        result.modules.push_back(module_path(all_convs.front()));
        for (Node *conv : plan.convs) split_conv(*graph, conv, parts, channels);
        for (Node *pool : plan.pools) {
            std::vector<Value *> pooled;
            for (Value *part : parts) {
                Node *piece = graph->createClone(pool, [](Value *v) { return v; });
                piece->insertBefore(pool);
                piece->replaceInput(0, part);
                piece->output()->setType(rank_only_type(pool->output()->type()));
                copy_origin(piece, pool);
                pooled.push_back(piece->output());
            }
            const auto users = pool->output()->uses();
            for (const auto &use : users) split_conv(*graph, use.user, pooled, channels);
            pool->destroy();
            ++pools_split;
        }
        convs_split += static_cast<int>(all_convs.size());
        cat->destroy();
        if (list->output()->uses().empty()) list->destroy();
        ++result.count;
    }
    result.changed = result.count > 0;
    result.details = {{"cats_removed", result.count}, {"convs_split", convs_split}, {"pools_split", pools_split}};
    return result;
}

}  // namespace ipex::passes
