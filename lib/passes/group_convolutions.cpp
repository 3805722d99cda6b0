#include "passes/group_convolutions.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ir/graph_utils.h"
#include "passes/prepacked_nodes.h"

namespace ipex::passes {

using torch::jit::Node;
using torch::jit::Value;

namespace {

bool constant_context(const Node *node) { return node->inputs().back()->node()->kind() == c10::prim::Constant; }

// A prepacked convolution (plain or with a sum) whose context is a constant, but a depthwise one
// (one input channel per group): MobileNet-style blocks stay with chain_convolutions, whose
// split rule was measured on them (MNASNet b8 ran 1.5-2% slower as one graph).
bool is_float_member(const Node *node) {
    if (!is_prepacked_conv(node) || !constant_context(node)) return false;
    const auto ctx = conv_context(node);
    const int64_t groups = ctx->params().groups;
    return groups == 1 || ctx->in_channels() != groups;
}

bool float_summand(const Node *node) { return node->kind().toQualString() != std::string(ops::kConvolution); }

// The tensors a member reads: its input, then its summand.
std::vector<Value *> tensors_read(const GroupFamily &f, const Node *node) {
    std::vector<Value *> read{node->input(0)};
    if (f.has_summand(node)) read.push_back(node->input(1));
    return read;
}

// The one value from outside that the run reads, or nullptr when it reads none or more.
Value *outside_input(const GroupFamily &f, const std::vector<Node *> &run) {
    std::set<const Value *> made;
    Value *outside = nullptr;
    for (const Node *node : run) {
        for (Value *v : tensors_read(f, node)) {
            if (made.count(v)) continue;
            if (outside && v != outside) return nullptr;
            outside = v;
        }
        made.insert(node->output());
    }
    return outside;
}

// Whether the run reads one value from outside, holds a sum, and only its last output is read
// after it (by a later node or as a graph output).
bool groupable(const GroupFamily &f, const std::vector<Node *> &run) {
    if (run.size() < 2 || !outside_input(f, run)) return false;
    if (std::none_of(run.begin(), run.end(), f.has_summand)) return false;
    const std::set<const Node *> members(run.begin(), run.end());
    for (const Node *node : run) {
        if (node == run.back()) continue;
        for (const auto &use : node->output()->uses())
            if (!members.count(use.user)) return false;  // a graph output is a use by the return node
    }
    return !run.back()->output()->uses().empty();
}

// The program of ops/graph_program.h for a groupable run.
std::vector<int64_t> program_of(const GroupFamily &f, const std::vector<Node *> &run, const Value *input) {
    std::map<const Value *, int64_t> index{{input, 0}};
    std::vector<int64_t> program;
    for (size_t k = 0; k < run.size(); ++k) {
        program.push_back(index.at(run[k]->input(0)));
        program.push_back(f.has_summand(run[k]) ? index.at(run[k]->input(1)) : -1);
        index[run[k]->output()] = static_cast<int64_t>(k) + 1;
    }
    return program;
}

void make_graph_op(const GroupFamily &f, torch::jit::Graph &graph, const std::vector<Node *> &run) {
    Value *input = outside_input(f, run);
    Node *last = run.back();
    torch::jit::WithInsertPoint guard(last);
    std::vector<Value *> contexts;
    for (Node *conv : run) contexts.push_back(conv->inputs().back());
    Node *list = graph.insertNode(graph.createList(contexts.front()->type(), contexts));
    Value *program = graph.insertConstant(c10::IValue(program_of(f, run, input)));
    Node *op = graph.insertNode(graph.create(c10::Symbol::fromQualString(f.op), {input, list->output(), program}));
    copy_origin(list, run.front());
    copy_origin(op, run.front());
    op->output()->setType(last->output()->type());
    last->output()->replaceAllUsesWith(op->output());
    for (auto it = run.rbegin(); it != run.rend(); ++it) (*it)->destroy();
}

}  // namespace

PassResult group_runs(std::shared_ptr<torch::jit::Graph> &graph, const GroupFamily &f) {
    PassResult result;
    int convolutions = 0, sums = 0;
    // Stretches of members with nothing but constants between them, in graph order.
    std::vector<std::vector<Node *>> stretches(1);
    for (Node *node : graph->block()->nodes()) {
        if (node->kind() == c10::prim::Constant) continue;
        if (f.member(node)) {
            stretches.back().push_back(node);
        } else if (!stretches.back().empty()) {
            stretches.emplace_back();
        }
    }
    for (const auto &stretch : stretches) {
        // From each start, the longest groupable run; after one, the next start is past it.
        for (size_t start = 0; start + 1 < stretch.size();) {
            size_t end = stretch.size();
            while (end > start + 1 && !groupable(f, {stretch.begin() + start, stretch.begin() + end})) --end;
            if (end == start + 1) {
                ++start;
                continue;
            }
            const std::vector<Node *> run(stretch.begin() + start, stretch.begin() + end);
            result.modules.push_back(node_label(run.front()) + ".." + node_label(run.back()) + " (" +
                                     std::to_string(run.size()) + " convolutions)");
            convolutions += static_cast<int>(run.size());
            sums += static_cast<int>(std::count_if(run.begin(), run.end(), f.has_summand));
            make_graph_op(f, *graph, run);
            ++result.count;
            start = end;
        }
    }
    result.changed = result.count > 0;
    result.details = {{"graphs", result.count}, {"convolutions", convolutions}, {"sums", sums}};
    return result;
}

PassResult group_convolutions(std::shared_ptr<torch::jit::Graph> &graph) {
    static const GroupFamily floats{is_float_member, float_summand, ops::kConvolutionGraph};
    return group_runs(graph, floats);
}

}  // namespace ipex::passes
