// prepack_weights + fuse_eltwise / fuse_conv_sum / fuse_linear_binary + restore_output_layout
// on frozen scripted modules: op counts before and after, the fused post-ops, and outputs
// against the unmodified graph. Also decompose_transformer_layer.
#include <gtest/gtest.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

#include "pass_test_utils.h"
#include "passes/contiguous_before_view.h"
#include "passes/decompose_transformer_layer.h"
#include "passes/fuse_conv_sum.h"
#include "passes/fuse_eltwise.h"
#include "passes/fuse_linear_binary.h"
#include "passes/prepack_weights.h"
#include "passes/prepacked_nodes.h"
#include "passes/restore_output_layout.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

// torch.conv2d with weight w<i>/bias b<i> (8 -> 8 channels, 3x3, padding 1).
std::string conv(const std::string &x, int i = 1) {
    const std::string n = std::to_string(i);
    return "torch.conv2d(" + x + ", self.w" + n + ", self.b" + n + ", [1, 1], [1, 1], [1, 1], 1)";
}
std::string linear(const std::string &x) { return "torch.linear(" + x + ", self.lw, self.lb)"; }

// A module with two 8->8 convs (w1/b1, w2/b2) and a 16->24 linear (lw/lb).
torch::jit::Module net(const std::string &body, const std::string &args = "x") {
    testing::Params params = {{"w1", at::randn({8, 8, 3, 3}) * 0.2}, {"b1", at::randn({8})},
                              {"w2", at::randn({8, 8, 3, 3}) * 0.2}, {"b2", at::randn({8})},
                              {"lw", at::randn({24, 16}) * 0.3},     {"lb", at::randn({24})},
                              {"row", at::randn({24})},              {"lo", at::randn({1, 8, 1, 1})}};
    return testing::make_module("Net", "def forward(self, " + args + "):\n" + body, params);
}

at::Tensor image(int64_t batch = 2) { return at::randn({batch, 8, 7, 9}); }

struct Pipeline {
    PassResult prepack, eltwise, sum, binary, layout;
};

// prepack_weights, the fusions to a fixed point, dead code removal, then the output layout.
Pipeline run_pipeline(GraphPtr &graph, bool restore = true) {
    Pipeline p;
    p.prepack = prepack_weights(graph, PrepackOptions{});
    for (bool changed = true; changed;) {
        const PassResult e = fuse_eltwise(graph), s = fuse_conv_sum(graph), b = fuse_linear_binary(graph);
        p.eltwise.merge(e);
        p.sum.merge(s);
        p.binary.merge(b);
        changed = e.changed || s.changed || b.changed;
    }
    torch::jit::EliminateDeadCode(graph);
    if (restore) p.layout = restore_output_layout(graph);
    contiguous_before_view(graph);
    graph->lint();
    return p;
}

// Runs both graphs on fresh copies of `inputs` (a graph may write into its inputs) and
// compares all outputs (fp32: max relative error <= 1e-4).
void expect_same_outputs(const GraphPtr &original, const GraphPtr &optimized, const torch::jit::Module &self,
                         const std::vector<at::Tensor> &inputs) {
    const auto fresh = [&] {
        std::vector<c10::IValue> v;
        for (const auto &t : inputs) v.push_back(t.clone());
        return v;
    };
    const auto want = testing::run_graph(original, self, fresh());
    const auto got = testing::run_graph(optimized, self, fresh());
    EXPECT_LE(testing::max_relative_error(got, want), testing::kFp32Tolerance) << *optimized;
}

// The post-ops of each prepacked node of the graph, in graph order.
std::vector<std::string> all_post_ops(const GraphPtr &graph) {
    std::vector<std::string> out;
    for (const torch::jit::Node *node : graph->nodes())
        if (is_prepacked(node)) out.push_back(ops::describe(post_ops_of(node)));
    return out;
}

// The post-ops of the only prepacked node of the graph.
std::string fused_post_ops(const GraphPtr &graph) {
    std::string out;
    int found = 0;
    for (const torch::jit::Node *node : graph->nodes())
        if (is_prepacked(node)) {
            out = ops::describe(post_ops_of(node));
            ++found;
        }
    EXPECT_EQ(found, 1) << *graph;
    return out;
}

class PrepackFusion : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

struct EltwiseCase {
    std::string name;
    std::string expr;      // applied to `y`
    std::string aten;      // the op it scripts to
    std::string post_ops;  // the fused context's post-ops
};

class PrepackFusionEltwise : public PrepackFusion, public ::testing::WithParamInterface<EltwiseCase> {};

TEST_P(PrepackFusionEltwise, FusesIntoConvolution) {
    const EltwiseCase &c = GetParam();
    auto frozen = testing::freeze(net("    y = " + conv("x") + "\n    return " + c.expr + "\n"));
    const GraphPtr original = frozen.graph->copy();
    ASSERT_EQ(testing::count(frozen.graph, "aten::conv2d"), 1);
    ASSERT_EQ(testing::count(frozen.graph, c.aten), 1) << *frozen.graph;
    const Pipeline p = run_pipeline(frozen.graph);
    EXPECT_EQ(p.prepack.count, 1);
    EXPECT_EQ(p.eltwise.count, 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::conv2d"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution"), 1);
    EXPECT_EQ(testing::count(frozen.graph, c.aten), 0) << *frozen.graph;
    EXPECT_EQ(fused_post_ops(frozen.graph), c.post_ops);
    expect_same_outputs(original, frozen.graph, frozen.module, {image()});
}

std::string float_max() {
    std::ostringstream out;
    out << std::numeric_limits<float>::max();
    return out.str();
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, PrepackFusionEltwise,
    ::testing::Values(EltwiseCase{"relu", "torch.relu(y)", "aten::relu", "relu"},
                      EltwiseCase{"relu_inplace", "torch.relu_(y)", "aten::relu_", "relu"},
                      EltwiseCase{"relu6", "torch.relu6(y)", "aten::relu6", "clip(0,6)"},
                      EltwiseCase{"hardtanh", "torch.hardtanh(y, 0.5, 2.0)", "aten::hardtanh", "clip(0.5,2)"},
                      EltwiseCase{"clamp_min", "torch.clamp(y, min=0.5)", "aten::clamp", "clip(0.5," + float_max() + ")"},
                      EltwiseCase{"clamp_both", "torch.clamp_(y, -1.0, 1.5)", "aten::clamp_", "clip(-1,1.5)"},
                      EltwiseCase{"gelu_tanh", "torch.gelu(y, approximate='tanh')", "aten::gelu", "gelu_tanh"},
                      EltwiseCase{"gelu_erf", "torch.gelu(y)", "aten::gelu", "gelu_erf"},
                      EltwiseCase{"silu", "torch.silu(y)", "aten::silu", "silu"},
                      EltwiseCase{"sigmoid", "torch.sigmoid(y)", "aten::sigmoid", "sigmoid"},
                      EltwiseCase{"tanh", "torch.tanh(y)", "aten::tanh", "tanh"},
                      EltwiseCase{"hardswish", "torch.hardswish(y)", "aten::hardswish", "hardswish"},
                      EltwiseCase{"leaky_relu", "torch.leaky_relu(y, 0.2)", "aten::leaky_relu", "leaky_relu(0.2)"},
                      EltwiseCase{"elu", "torch.elu(y, 0.7)", "aten::elu", "elu(0.7)"}),
    [](const ::testing::TestParamInfo<EltwiseCase> &info) { return info.param.name; });

TEST_F(PrepackFusion, LinearGelu) {
    auto frozen = testing::freeze(net("    return torch.gelu(" + linear("x") + ")\n"));
    const GraphPtr original = frozen.graph->copy();
    const Pipeline p = run_pipeline(frozen.graph);
    EXPECT_EQ(p.eltwise.count, 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::linear"), 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::gelu"), 0);
    EXPECT_EQ(fused_post_ops(frozen.graph), "gelu_erf");
    EXPECT_EQ(p.layout.count, 0);  // no convolution: outputs untouched
    expect_same_outputs(original, frozen.graph, frozen.module, {at::randn({3, 5, 16})});
}

// A ResNet basic block: conv -> relu_ -> conv, += x, relu_.
TEST_F(PrepackFusion, ResidualBlockInPlaceForm) {
    auto frozen = testing::freeze(net("    y = torch.relu_(" + conv("x", 1) + ")\n    z = " + conv("y", 2) +
                                      "\n    z += x\n    return torch.relu_(z)\n"));
    const GraphPtr original = frozen.graph->copy();
    EXPECT_EQ(testing::count(frozen.graph, "aten::conv2d"), 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::relu_"), 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::add_"), 1);
    const Pipeline p = run_pipeline(frozen.graph);
    EXPECT_EQ(p.prepack.count, 2);
    EXPECT_EQ(p.sum.count, 1);
    EXPECT_EQ(p.eltwise.count, 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::conv2d"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution"), 1);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution_sum"), 1);
    EXPECT_EQ(testing::count(frozen.graph, "aten::relu_"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "aten::add_"), 0);
    for (const torch::jit::Node *node : frozen.graph->nodes()) {
        if (node->kind().toQualString() == std::string("ipex::convolution_sum"))
            EXPECT_EQ(ops::describe(post_ops_of(node)), "sum+relu");
        if (node->kind().toQualString() == std::string("ipex::convolution"))
            EXPECT_EQ(ops::describe(post_ops_of(node)), "relu");
    }
    expect_same_outputs(original, frozen.graph, frozen.module, {image(1)});
    expect_same_outputs(original, frozen.graph, frozen.module, {image(3)});
}

TEST_F(PrepackFusion, ResidualAddBothOperandOrders) {
    for (const std::string expr : {conv("x") + " + x", "x + " + conv("x")}) {
        auto frozen = testing::freeze(net("    return torch.relu(" + expr + ")\n"));
        const GraphPtr original = frozen.graph->copy();
        const Pipeline p = run_pipeline(frozen.graph);
        EXPECT_EQ(p.sum.count, 1) << expr;
        EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution_sum"), 1) << expr;
        EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution"), 0) << expr;
        EXPECT_EQ(testing::count(frozen.graph, "aten::add"), 0) << expr;
        EXPECT_EQ(testing::count(frozen.graph, "aten::relu"), 0) << expr;
        EXPECT_EQ(fused_post_ops(frozen.graph), "sum+relu") << expr;
        expect_same_outputs(original, frozen.graph, frozen.module, {image()});
    }
}

// conv(x) + alpha * r folds as sum(alpha); the other operand a fresh prepacked output sums in place.
TEST_F(PrepackFusion, SumWithAlphaAndInPlace) {
    auto frozen = testing::freeze(net("    return torch.add(" + conv("x") + ", r, alpha=2.5)\n", "x, r"));
    const GraphPtr original = frozen.graph->copy();
    const Pipeline p = run_pipeline(frozen.graph);
    EXPECT_EQ(p.sum.count, 1);
    EXPECT_EQ(fused_post_ops(frozen.graph), "sum(2.5)");
    expect_same_outputs(original, frozen.graph, frozen.module, {image(), at::randn({2, 8, 7, 9})});

    auto two = testing::freeze(net("    a = " + conv("x", 1) + "\n    b = " + conv("x", 2) + "\n    return torch.relu(a + b)\n"));
    const GraphPtr original2 = two.graph->copy();
    const Pipeline p2 = run_pipeline(two.graph);
    EXPECT_EQ(p2.sum.count, 1);
    EXPECT_EQ(testing::count(two.graph, "ipex::convolution"), 1);
    EXPECT_EQ(testing::count(two.graph, "ipex::convolution_sum_"), 1);
    EXPECT_EQ(testing::count(two.graph, "ipex::convolution_sum"), 0);
    ASSERT_EQ(p2.sum.modules.size(), 1u);
    EXPECT_NE(p2.sum.modules[0].find("in place"), std::string::npos) << p2.sum.modules[0];
    expect_same_outputs(original2, two.graph, two.module, {image()});
}

// relu(conv1(x)) + conv2(x): the sum folds into conv2, which has no post-ops yet; in
// relu(conv(x)) + x the add stays (oneDNN 2.6 runs an activation then a sum in its reference
// kernel), reported as skipped, whichever operand order.
TEST_F(PrepackFusion, SumNotAfterAnActivation) {
    auto two = testing::freeze(net("    a = torch.relu(" + conv("x", 1) + ")\n    b = " + conv("x", 2) +
                                   "\n    return torch.relu(a + b)\n"));
    const GraphPtr original = two.graph->copy();
    const Pipeline p = run_pipeline(two.graph);
    EXPECT_EQ(p.sum.count, 1);
    EXPECT_EQ(testing::count(two.graph, "aten::add"), 0);
    std::vector<std::string> post_ops = all_post_ops(two.graph);
    std::sort(post_ops.begin(), post_ops.end());
    EXPECT_EQ(post_ops, (std::vector<std::string>{"relu", "sum+relu"})) << *two.graph;
    expect_same_outputs(original, two.graph, two.module, {image()});

    for (const std::string expr : {"a + x", "x + a"}) {
        auto one = testing::freeze(net("    a = torch.relu(" + conv("x") + ")\n    return " + expr + "\n"));
        const GraphPtr original1 = one.graph->copy();
        const Pipeline p1 = run_pipeline(one.graph);
        EXPECT_EQ(p1.sum.count, 0) << expr;
        EXPECT_EQ(testing::count(one.graph, "aten::add"), 1) << expr;
        EXPECT_EQ(fused_post_ops(one.graph), "relu") << expr;
        ASSERT_FALSE(p1.sum.skipped.empty()) << expr;  // once per round of the fusions
        for (const std::string &why : p1.sum.skipped)
            EXPECT_NE(why.find("an activation before the sum"), std::string::npos) << why;
        expect_same_outputs(original1, one.graph, one.module, {image()});
    }
}

// The residual of a bottleneck block: `a` feeds a conv and then the add, its last reader, so the
// sum writes into a's buffer (ipex::convolution_sum_). Not when `a`, or a view of it, is read
// after the add, is returned, is the graph input, or is the summed conv's own input.
TEST_F(PrepackFusion, SumInPlaceOnlyIntoADeadOperand) {
    struct Case {
        std::string body;
        bool in_place;
    };
    const std::string a = "    a = torch.relu(" + conv("x", 1) + ")\n    b = torch.relu(" + conv("a", 2) + ")\n";
    const std::vector<Case> cases = {
        {a + "    return torch.relu(" + conv("b", 2) + " + a)\n", true},
        {a + "    y = torch.relu(" + conv("b", 2) + " + a)\n    return y * a.sum()\n", false},
        {a + "    v = a.view([-1])\n    y = " + conv("b", 2) + " + a\n    return y, v\n", false},
        {a + "    v = a.view([-1])\n    y = " + conv("b", 2) + " + a\n    return y * v.sum()\n", false},
        {a + "    y = " + conv("b", 2) + " + a\n    return y, a\n", false},
        {a + "    return torch.relu(" + conv("a", 2) + " + a)\n", false},
        {"    return torch.relu(" + conv("x", 2) + " + x)\n", false},
        {"    s = torch.sin(x)\n    return torch.relu(" + conv("x", 2) + " + s)\n", true},
        {"    return torch.relu(" + conv("x", 2) + " + self.lo.expand([2, 8, 7, 9]))\n", false},
    };
    for (const auto &c : cases) {
        auto frozen = testing::freeze(net(c.body));
        const GraphPtr original = frozen.graph->copy();
        const Pipeline p = run_pipeline(frozen.graph);
        EXPECT_EQ(p.sum.count, 1) << c.body;
        EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution_sum_"), c.in_place ? 1 : 0) << c.body << *frozen.graph;
        EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution_sum"), c.in_place ? 0 : 1) << c.body;
        const at::Tensor x = image();
        const at::Tensor kept = x.clone();
        expect_same_outputs(original, frozen.graph, frozen.module, {x});
        const auto first = testing::run_graph(frozen.graph, frozen.module, {x});
        EXPECT_TRUE(at::equal(x, kept)) << "the input was written: " << c.body;
        const auto second = testing::run_graph(frozen.graph, frozen.module, {x});
        EXPECT_EQ(testing::max_relative_error(second, first), 0.0) << "a constant was written: " << c.body;
    }
}

// Shapes unknown at optimize time: the fused sum meets an `other` that broadcasts the output
// (batch 1 -> 3) at run time and falls back to the broadcast result.
TEST_F(PrepackFusion, SumBroadcastingAtRunTime) {
    auto frozen = testing::freeze(net("    return torch.relu(" + conv("x") + " + r)\n", "x, r"));
    const GraphPtr original = frozen.graph->copy();
    run_pipeline(frozen.graph);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution_sum"), 1);
    const std::vector<at::Tensor> inputs{image(1), at::randn({3, 8, 7, 9})};
    expect_same_outputs(original, frozen.graph, frozen.module, inputs);
    const auto got = testing::run_graph(frozen.graph, frozen.module, {inputs[0], inputs[1]});
    EXPECT_EQ(got.toTensor().sizes(), (std::vector<int64_t>{3, 8, 7, 9}));
}

TEST_F(PrepackFusion, LinearAddAndMul) {
    struct Case {
        std::string body, args, op;
        std::vector<at::Tensor> inputs;
    };
    const std::vector<Case> cases = {
        {"    return " + linear("x") + " + r\n", "x, r", "add", {at::randn({3, 5, 16}), at::randn({3, 5, 24})}},
        {"    return r + " + linear("x") + "\n", "x, r", "add", {at::randn({3, 5, 16}), at::randn({3, 5, 24})}},
        {"    return torch.relu(" + linear("x") + " + self.row)\n", "x", "add+relu", {at::randn({4, 16})}},
        {"    y = " + linear("x") + "\n    y += r\n    return y\n", "x, r", "add", {at::randn({4, 16}), at::randn({4, 24})}},
        {"    return " + linear("x") + " * g\n", "x, g", "mul", {at::randn({2, 16}), at::randn({2, 24})}},
        {"    return torch.sigmoid(g) * torch.gelu(" + linear("x") + ", approximate='tanh')\n", "x, g",
         "gelu_tanh+mul", {at::randn({2, 16}), at::randn({24})}},
    };
    for (const Case &c : cases) {
        auto frozen = testing::freeze(net(c.body, c.args));
        const GraphPtr original = frozen.graph->copy();
        const Pipeline p = run_pipeline(frozen.graph);
        EXPECT_EQ(p.binary.count, 1) << c.body;
        EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 0) << c.body;
        EXPECT_EQ(testing::count(frozen.graph, "ipex::linear_binary"), 1) << c.body;
        EXPECT_EQ(testing::count(frozen.graph, "aten::add") + testing::count(frozen.graph, "aten::add_") +
                      testing::count(frozen.graph, "aten::mul"),
                  0)
            << *frozen.graph;
        EXPECT_EQ(fused_post_ops(frozen.graph), c.op) << c.body;
        expect_same_outputs(original, frozen.graph, frozen.module, c.inputs);
    }
}

// conv -> relu -> conv -> hardtanh -> sigmoid: each conv takes its whole chain.
TEST_F(PrepackFusion, ChainOfConvsAndEltwise) {
    auto frozen = testing::freeze(net("    y = torch.relu(" + conv("x", 1) + ")\n    z = torch.hardtanh(" + conv("y", 2) +
                                      ", -0.5, 0.5)\n    return torch.sigmoid(z)\n"));
    const GraphPtr original = frozen.graph->copy();
    const Pipeline p = run_pipeline(frozen.graph);
    EXPECT_EQ(p.eltwise.count, 3);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::convolution"), 2);
    EXPECT_EQ(testing::count(frozen.graph, "aten::relu") + testing::count(frozen.graph, "aten::hardtanh") +
                  testing::count(frozen.graph, "aten::sigmoid"),
              0);
    EXPECT_EQ(all_post_ops(frozen.graph), (std::vector<std::string>{"relu", "clip(-0.5,0.5)+sigmoid"}));
    expect_same_outputs(original, frozen.graph, frozen.module, {image()});
}

// ---- must not fuse ----

struct Kept {
    std::string body, args;
    std::map<std::string, int> counts;  // after the pipeline
    std::vector<at::Tensor> inputs;
};

void expect_kept(const Kept &c) {
    auto frozen = testing::freeze(net(c.body, c.args));
    const GraphPtr original = frozen.graph->copy();
    run_pipeline(frozen.graph);
    for (const auto &[kind, n] : c.counts) EXPECT_EQ(testing::count(frozen.graph, kind), n) << kind << "\n" << *frozen.graph;
    expect_same_outputs(original, frozen.graph, frozen.module, c.inputs);
}

TEST_F(PrepackFusion, IntermediateWithSecondUserIsKept) {
    expect_kept({"    y = " + conv("x") + "\n    return torch.relu(y) + y\n", "x",
                 {{"ipex::convolution", 1}, {"ipex::convolution_sum", 0}, {"aten::relu", 1}, {"aten::add", 1}},
                 {image()}});
    expect_kept({"    y = " + linear("x") + "\n    return torch.gelu(y) * y\n", "x",
                 {{"ipex::linear", 1}, {"ipex::linear_binary", 0}, {"aten::gelu", 1}, {"aten::mul", 1}},
                 {at::randn({3, 16})}});
}

TEST_F(PrepackFusion, IntermediateReturnedIsKept) {
    expect_kept({"    y = " + conv("x") + "\n    return torch.relu(y), y\n", "x",
                 {{"ipex::convolution", 1}, {"aten::relu", 1}}, {image()}});
    // relu_ writes into y, which is returned.
    expect_kept({"    y = " + conv("x") + "\n    z = torch.relu_(y)\n    return y\n", "x",
                 {{"ipex::convolution", 1}, {"aten::relu_", 1}}, {image()}});
    expect_kept({"    y = " + linear("x") + "\n    return [y + r, y]\n", "x, r",
                 {{"ipex::linear", 1}, {"ipex::linear_binary", 0}, {"aten::add", 1}},
                 {at::randn({3, 16}), at::randn({3, 24})}});
}

TEST_F(PrepackFusion, AddInPlaceIntoOtherOperandIsKept) {
    expect_kept({"    return x.add_(" + conv("x") + ")\n", "x",
                 {{"ipex::convolution", 1}, {"ipex::convolution_sum", 0}, {"aten::add_", 1}}, {image()}});
    expect_kept({"    return r.add_(" + linear("x") + ")\n", "x, r",
                 {{"ipex::linear", 1}, {"ipex::linear_binary", 0}, {"aten::add_", 1}},
                 {at::randn({3, 16}), at::randn({3, 24})}});
}

TEST_F(PrepackFusion, AddWithAlphaOnConvOperandIsKept) {
    expect_kept({"    return torch.add(r, " + conv("x") + ", alpha=2.0)\n", "x, r",
                 {{"ipex::convolution", 1}, {"ipex::convolution_sum", 0}, {"aten::add", 1}},
                 {image(), at::randn({2, 8, 7, 9})}});
    // Linear binary fuses only alpha 1.
    expect_kept({"    return torch.add(" + linear("x") + ", r, alpha=0.5)\n", "x, r",
                 {{"ipex::linear", 1}, {"ipex::linear_binary", 0}, {"aten::add", 1}},
                 {at::randn({3, 16}), at::randn({3, 24})}});
}

TEST_F(PrepackFusion, ClampWithTensorBoundsIsKept) {
    expect_kept({"    return torch.clamp(" + conv("x") + ", self.lo)\n", "x",
                 {{"ipex::convolution", 1}, {"aten::clamp", 1}}, {image()}});
}

// A convolution has no mul post-op; a mul after it stays.
TEST_F(PrepackFusion, ConvMulIsKept) {
    expect_kept({"    return " + conv("x") + " * r\n", "x, r",
                 {{"ipex::convolution", 1}, {"ipex::convolution_sum", 0}, {"aten::mul", 1}},
                 {image(), at::randn({2, 8, 7, 9})}});
}

TEST_F(PrepackFusion, NonFusableEltwiseAndScalarOperandsAreKept) {
    // elu with scale != 1 has no oneDNN form.
    expect_kept({"    return torch.elu(" + conv("x") + ", 1.0, 2.0)\n", "x", {{"ipex::convolution", 1}, {"aten::elu", 1}},
                 {image()}});
    // A Scalar other operand is not a tensor post-op.
    expect_kept({"    return " + conv("x") + " + 1.5\n", "x",
                 {{"ipex::convolution", 1}, {"ipex::convolution_sum", 0}, {"aten::add", 1}}, {image()}});
    expect_kept({"    return " + linear("x") + " * 3.0\n", "x",
                 {{"ipex::linear", 1}, {"ipex::linear_binary", 0}, {"aten::mul", 1}}, {at::randn({3, 16})}});
}

// The fused op takes the place of the add; an in-place write to the conv's (or linear's) input
// between the two must not change what the convolution reads.
TEST_F(PrepackFusion, InputMutatedBeforeTheAdd) {
    expect_kept({"    y = " + conv("x") + "\n    x.relu_()\n    return y + x\n", "x", {{"aten::conv2d", 0}}, {image()}});
    expect_kept({"    y = " + conv("x") + "\n    x.mul_(2.0)\n    return y + r\n", "x, r", {{"aten::conv2d", 0}},
                 {image(), image()}});
    expect_kept({"    y = " + linear("x") + "\n    x.sub_(1.0)\n    return y * r\n", "x, r", {{"aten::linear", 0}},
                 {at::randn({3, 16}), at::randn({3, 24})}});
}

// The other operand's dtype is unknown when the pass runs: an integer or bool tensor (a mask)
// must still give aten's promoted result after fusion.
TEST_F(PrepackFusion, LinearMulWithBoolMask) {
    expect_kept({"    return " + linear("x") + " * m\n", "x, m", {{"aten::linear", 0}},
                 {at::randn({3, 16}), at::rand({3, 24}) > 0.5}});
}

TEST_F(PrepackFusion, ConvAddWithFp64Other) {
    expect_kept({"    return " + conv("x") + " + r\n", "x, r", {{"aten::conv2d", 0}},
                 {image(), at::randn({2, 8, 7, 9}, at::kDouble)}});
}

TEST_F(PrepackFusion, UnfrozenWeightsAreNotPrepacked) {
    auto module = net("    return torch.relu(" + conv("x") + ")\n");
    module.eval();
    GraphPtr graph = module.get_method("forward").graph()->copy();
    const GraphPtr original = graph->copy();
    const Pipeline p = run_pipeline(graph);
    EXPECT_EQ(p.prepack.count, 0);
    ASSERT_FALSE(p.prepack.skipped.empty());
    EXPECT_NE(p.prepack.skipped[0].find("not a constant"), std::string::npos) << p.prepack.skipped[0];
    EXPECT_EQ(testing::count(graph, "aten::conv2d"), 1);
    EXPECT_EQ(testing::count(graph, "ipex::convolution"), 0);
    EXPECT_EQ(testing::count(graph, "aten::relu"), 1);
    EXPECT_EQ(p.layout.count, 0);
    expect_same_outputs(original, graph, module, {image()});
}

// ---- restore_output_layout ----

TEST_F(PrepackFusion, OutputsAreContiguousAfterPipeline) {
    auto frozen = testing::freeze(net("    return " + conv("x") + "\n"));
    const GraphPtr original = frozen.graph->copy();
    GraphPtr without = frozen.graph->copy();
    run_pipeline(without, /*restore=*/false);
    const at::Tensor x = image();
    EXPECT_FALSE(testing::run_graph(without, frozen.module, {x}).toTensor().is_contiguous())
        << "prepacked convolutions return channels-last";
    const Pipeline p = run_pipeline(frozen.graph);
    EXPECT_EQ(p.layout.count, 1);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::contiguous"), 1);
    const at::Tensor got = testing::run_graph(frozen.graph, frozen.module, {x}).toTensor();
    EXPECT_TRUE(got.is_contiguous());
    expect_same_outputs(original, frozen.graph, frozen.module, {x});

    // Tuples: every tensor in it.
    auto tuple = testing::freeze(net("    return " + conv("x", 1) + ", (torch.relu(" + conv("x", 2) + "), 3)\n"));
    const Pipeline p2 = run_pipeline(tuple.graph);
    EXPECT_EQ(p2.layout.count, 2);
    for (const auto &t : testing::flatten_tensors(testing::run_graph(tuple.graph, tuple.module, {x})))
        EXPECT_TRUE(t.is_contiguous());

    // Dicts (torchvision's segmentation models return {"out": ..., "aux": ...}): every value.
    auto dict = testing::freeze(net("    return {'out': " + conv("x", 1) + ", 'aux': torch.relu(" + conv("x", 2) +
                                    ")}\n"));
    const GraphPtr dict_original = dict.graph->copy();
    const Pipeline p3 = run_pipeline(dict.graph);
    EXPECT_EQ(p3.layout.count, 2);
    const c10::IValue out = testing::run_graph(dict.graph, dict.module, {x});
    ASSERT_TRUE(out.isGenericDict());
    for (const auto &item : out.toGenericDict()) EXPECT_TRUE(item.value().toTensor().is_contiguous());
    const c10::IValue want = testing::run_graph(dict_original, dict.module, {x});
    for (const auto &item : want.toGenericDict())
        EXPECT_TRUE(at::allclose(out.toGenericDict().at(item.key()).toTensor(), item.value().toTensor(), 1e-4, 1e-5));
}

// ---- decompose_transformer_layer ----

constexpr int64_t kEmbed = 16, kHeads = 2, kFfn = 32;

torch::jit::Module encoder_layer(bool gelu, bool norm_first, bool mask) {
    testing::Params params = {
        {"qkv_weight", at::randn({3 * kEmbed, kEmbed}) * 0.2}, {"qkv_bias", at::randn({3 * kEmbed}) * 0.1},
        {"proj_weight", at::randn({kEmbed, kEmbed}) * 0.2},    {"proj_bias", at::randn({kEmbed}) * 0.1},
        {"norm_weight_1", at::rand({kEmbed}) + 0.5},           {"norm_bias_1", at::randn({kEmbed}) * 0.1},
        {"norm_weight_2", at::rand({kEmbed}) + 0.5},           {"norm_bias_2", at::randn({kEmbed}) * 0.1},
        {"ffn_weight_1", at::randn({kFfn, kEmbed}) * 0.2},     {"ffn_bias_1", at::randn({kFfn}) * 0.1},
        {"ffn_weight_2", at::randn({kEmbed, kFfn}) * 0.2},     {"ffn_bias_2", at::randn({kEmbed}) * 0.1},
    };
    const std::string flags = std::string(gelu ? "True" : "False") + ", " + (norm_first ? "True" : "False");
    const std::string source =
        std::string("def forward(self, x") + (mask ? ", mask" : "") + "):\n" +
        "    return torch._transformer_encoder_layer_fwd(x, " + std::to_string(kEmbed) + ", " + std::to_string(kHeads) +
        ", self.qkv_weight, self.qkv_bias, self.proj_weight, self.proj_bias, " + flags +
        ", 1e-5, self.norm_weight_1, self.norm_bias_1, self.norm_weight_2, self.norm_bias_2, self.ffn_weight_1, "
        "self.ffn_bias_1, self.ffn_weight_2, self.ffn_bias_2, " +
        (mask ? "mask, 1" : "None, None") + ")\n";
    return testing::make_module("EncoderLayer", source, params);
}

class PrepackFusionTransformer : public PrepackFusion, public ::testing::WithParamInterface<std::tuple<bool, bool>> {};

TEST_P(PrepackFusionTransformer, MatchesFusedOp) {
    const auto [gelu, norm_first] = GetParam();
    auto frozen = testing::freeze(encoder_layer(gelu, norm_first, false));
    const at::Tensor x = at::randn({2, 5, kEmbed});
    frozen.graph->inputs()[1]->setType(c10::TensorType::create(x));
    const GraphPtr original = frozen.graph->copy();
    ASSERT_EQ(testing::count(frozen.graph, "aten::_transformer_encoder_layer_fwd"), 1);
    const PassResult r = decompose_transformer_layer(frozen.graph);
    EXPECT_EQ(r.count, 1);
    EXPECT_TRUE(r.skipped.empty());
    EXPECT_EQ(testing::count(frozen.graph, "aten::_transformer_encoder_layer_fwd"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 4);
    EXPECT_EQ(testing::count(frozen.graph, "aten::layer_norm"), 2);
    EXPECT_EQ(testing::count(frozen.graph, gelu ? "aten::gelu" : "aten::relu"), 1);
    expect_same_outputs(original, frozen.graph, frozen.module, {x});
    expect_same_outputs(original, frozen.graph, frozen.module, {at::randn({3, 7, kEmbed})});

    // Then prepacked: every linear becomes an ipex op; the activation and residual adds fold.
    const Pipeline p = run_pipeline(frozen.graph);
    EXPECT_EQ(p.prepack.count, 4);
    EXPECT_EQ(testing::count(frozen.graph, "aten::linear"), 0);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::linear") + testing::count(frozen.graph, "ipex::linear_binary"), 4);
    EXPECT_EQ(testing::count(frozen.graph, gelu ? "aten::gelu" : "aten::relu"), 0);
    EXPECT_EQ(p.binary.count, 2);
    expect_same_outputs(original, frozen.graph, frozen.module, {x});
}

INSTANTIATE_TEST_SUITE_P(Variants, PrepackFusionTransformer,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>> &info) {
                             return std::string(std::get<0>(info.param) ? "gelu" : "relu") +
                                    (std::get<1>(info.param) ? "_pre_norm" : "_post_norm");
                         });

}  // namespace
}  // namespace ipex::passes
