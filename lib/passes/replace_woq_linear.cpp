#include "passes/replace_woq_linear.h"

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <tuple>
#include <set>

#include "base/cpu_features.h"
#include "base/errors.h"
#include "ir/graph_utils.h"

namespace ipex::woq {
namespace {

using torch::jit::Node;
using torch::jit::Value;

constexpr size_t kNamesInMessage = 4;

std::string first_names(const std::vector<std::string> &names) {
    std::string s;
    for (size_t i = 0; i < names.size() && i < kNamesInMessage; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > kNamesInMessage) s += " and " + std::to_string(names.size() - kNamesInMessage) + " more";
    return s;
}

std::optional<torch::jit::Module> child_named(const torch::jit::Module &m, const std::string &name) {
    for (const auto &c : m.named_children())
        if (c.name == name) return c.value;
    return std::nullopt;
}

// Finds `name` below `m` through children that have no forward (containers), up to `depth`
// levels; returns the dotted path from m, or "".
std::string find_through_containers(const torch::jit::Module &m, const std::string &name, int depth) {
    if (depth == 0) return "";
    for (const auto &c : m.named_children()) {
        if (c.value.find_method("forward")) continue;
        if (child_named(c.value, name)) return c.name + "." + name;
        const std::string deeper = find_through_containers(c.value, name, depth - 1);
        if (!deeper.empty()) return c.name + "." + deeper;
    }
    return "";
}

// The module path of a node with the container names its call stack leaves out.
std::string resolved_path(const Node *node, const torch::jit::Module *root) {
    const std::string path = passes::node_label(node);
    if (!root) return path;
    torch::jit::Module cur = *root;
    std::string out;
    size_t start = 0;
    while (start <= path.size()) {
        const size_t dot = path.find('.', start);
        const std::string name = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        std::string step = name;
        std::optional<torch::jit::Module> next = child_named(cur, name);
        if (!next) {
            step = find_through_containers(cur, name, 2);
            if (step.empty()) return path;
            next = cur;
            size_t from = 0;
            while (from <= step.size()) {
                const size_t d = step.find('.', from);
                next = child_named(*next, step.substr(from, d == std::string::npos ? std::string::npos : d - from));
                if (!next || d == std::string::npos) break;
                from = d + 1;
            }
            if (!next) return path;
        }
        out += (out.empty() ? "" : ".") + step;
        cur = *next;
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return out;
}

// Inserts ipex::woq_linear for `layer` in place of the linear `node`.
void replace_node(torch::jit::Graph &graph, Node *node, const WoqLayer &layer, const std::string &mode) {
    auto constant = [&](const c10::IValue &v) { return passes::insert_constant_at_top(graph, v, node); };
    Value *bias = layer.bias.defined() ? constant(layer.bias) : node->input(2);
    Value *perm = layer.perm.defined() ? constant(layer.perm) : constant(c10::IValue());
    torch::jit::WithInsertPoint guard(node);
    Node *woq = graph.create(c10::Symbol::fromQualString("ipex::woq_linear"),
                             {node->input(0), constant(layer.qweight), constant(layer.scales), constant(layer.zeros),
                              bias, perm, constant(int64_t(layer.bits)), constant(layer.group_size),
                              constant(layer.in_features), constant(mode)},
                             1);
    woq->setSourceRange(node->sourceRange());
    if (node->callstack()) woq->setCallStack(*node->callstack());
    graph.insertNode(woq);
    woq->output()->setType(c10::TensorType::get());
    node->output()->replaceAllUsesWith(woq->output());
    node->destroy();
}

}  // namespace

nlohmann::json WoqReplaceReport::to_json() const {
    nlohmann::json j = pass.to_json();
    j["replaced"] = replaced;
    j["missing"] = missing;
    j["mismatched"] = mismatched;
    j["unused"] = unused;
    j["kept"] = kept;
    return j;
}

WoqReplaceReport replace_woq_linear(std::shared_ptr<torch::jit::Graph> &graph, const WoqReplaceOptions &options) {
    TORCH_INTERNAL_ASSERT(options.checkpoint || options.rtn_bits == 4 || options.rtn_bits == 8);
    WoqReplaceReport report;
    const std::set<std::string> full_precision =
        options.checkpoint ? std::set<std::string>(options.checkpoint->full_precision.begin(),
                                                   options.checkpoint->full_precision.end())
                           : std::set<std::string>();
    // Decide every node first; mutate only when the checkpoint fits (or partial is allowed).
    std::vector<std::tuple<Node *, const WoqLayer *, std::string>> plan;
    std::set<std::string> used;
    std::map<const void *, WoqLayer> quantized;  // RTN layers by weight storage (shared weights)
    const auto linears = passes::collect_nodes_of_kind(graph->block(), {c10::Symbol::fromQualString("aten::linear")});
    for (Node *node : linears) {
        const std::string path = resolved_path(node, options.module);
        const auto weight = passes::constant_tensor(node->input(1));
        if (!weight || weight->dim() != 2 || !at::isFloatingType(weight->scalar_type())) {
            report.pass.skipped.push_back(path + ": weight is not a constant 2-D float tensor (freeze the model)");
            continue;
        }
        const int64_t n = weight->size(0), k = weight->size(1);
        if (options.checkpoint) {
            const auto it = options.checkpoint->layers.find(path);
            if (it == options.checkpoint->layers.end()) {
                if (full_precision.count(path)) report.kept.push_back(path);
                else report.missing.push_back(path);
                continue;
            }
            used.insert(path);
            const WoqLayer &layer = it->second;
            if (layer.out_features != n || layer.in_features != k) {
                report.mismatched.push_back(path + ": model weight is [" + std::to_string(n) + ", " + std::to_string(k) +
                                            "], checkpoint layer is [" + std::to_string(layer.out_features) + ", " +
                                            std::to_string(layer.in_features) + "]");
                continue;
            }
            plan.emplace_back(node, &layer, path);
            continue;
        }
        const int64_t gs = options.rtn_group_size == -1 ? k : options.rtn_group_size;
        if (k % gs != 0) {
            report.pass.skipped.push_back(path + ": group size " + std::to_string(gs) + " does not divide in_features " +
                                          std::to_string(k));
            continue;
        }
        auto it = quantized.find(weight->data_ptr());
        if (it == quantized.end()) {
            // The node's own bias input stays in place (the layer has none).
            it = quantized.emplace(weight->data_ptr(),
                                   quantize_rtn(path, *weight, at::Tensor(), options.rtn_bits, options.rtn_group_size))
                     .first;
        }
        plan.emplace_back(node, &it->second, path);
    }
    if (options.checkpoint)
        for (const auto &[name, layer] : options.checkpoint->layers)
            if (!used.count(name)) report.unused.push_back(name);

    if (options.checkpoint && !options.allow_partial) {
        std::string problems;
        if (!report.missing.empty())
            problems += "; Linears with no checkpoint layer: " + first_names(report.missing);
        if (!report.mismatched.empty()) problems += "; shape mismatches: " + first_names(report.mismatched);
        if (!report.unused.empty()) problems += "; checkpoint layers no Linear uses: " + first_names(report.unused);
        if (!problems.empty())
            throw_bad_input("the low-precision checkpoint does not fit the model" + problems +
                            " (module paths must match; --allow-partial replaces only what matches)");
    }
    for (const auto &[node, layer, path] : plan) {
        replace_node(*graph, node, *layer, options.lowp_mode);
        report.replaced.push_back(path);
        report.pass.modules.push_back(path);
    }
    report.pass.count = static_cast<int>(plan.size());
    report.pass.changed = !plan.empty();
    return report;
}

}  // namespace ipex::woq
