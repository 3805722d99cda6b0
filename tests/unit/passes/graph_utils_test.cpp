#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include "pass_test_utils.h"
#include "ir/graph_utils.h"

namespace ipex::passes {
namespace {

TEST(GraphUtils, HistogramCountsNestedBlocksWithoutConstants) {
    auto graph = std::make_shared<torch::jit::Graph>();
    torch::jit::parseIR(R"IR(
graph(%x : Tensor, %c : bool):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = prim::If(%c)
    block0():
      %a : Tensor = aten::relu(%x)
      -> (%a)
    block1():
      %b : Tensor = aten::add(%x, %x, %one)
      %d : Tensor = aten::relu(%b)
      -> (%d)
  return (%y)
)IR",
                        graph.get());
    const auto counts = op_histogram(*graph);
    EXPECT_EQ(counts.at("aten::relu"), 2);
    EXPECT_EQ(counts.at("aten::add"), 1);
    EXPECT_EQ(counts.at("prim::If"), 1);
    EXPECT_EQ(counts.count("prim::Constant"), 0u);
    EXPECT_EQ(count_op(*graph, "aten::relu"), 2);
    EXPECT_EQ(count_op(*graph, "aten::conv2d"), 0);
}

TEST(GraphUtils, ModulePathFollowsSubmodules) {
    at::manual_seed(0);
    auto inner = testing::make_module("Inner", "def forward(self, x):\n    return self.fc.forward(x).relu()\n", {},
                                      {{"fc", testing::linear_module(3, 3)}});
    auto model = testing::make_module("Outer",
                                      "def forward(self, x):\n    return self.helper(self.layer1.forward(x))\n"
                                      "def helper(self, x):\n    return x * 2.0\n",
                                      {}, {{"layer1", inner}});
    auto frozen = testing::freeze(model);
    std::map<std::string, std::string> paths;
    for (torch::jit::Node *node : collect_nodes(frozen.graph->block()))
        if (node->kind() != c10::prim::Constant) paths[node->kind().toQualString()] = module_path(node);
    EXPECT_EQ(paths["aten::linear"], "layer1.fc");
    EXPECT_EQ(paths["aten::relu"], "layer1");
    EXPECT_EQ(paths["aten::mul"], "");  // a method of the top module, not a submodule
}

TEST(GraphUtils, ConstantAccessors) {
    auto graph = std::make_shared<torch::jit::Graph>();
    torch::jit::Value *input = graph->addInput("x");
    input->setType(c10::TensorType::get());
    torch::jit::Value *tensor = insert_constant_at_top(*graph, at::ones({2}));
    torch::jit::Value *flag = insert_constant_at_top(*graph, false);
    torch::jit::Value *none = insert_constant_at_top(*graph, c10::IValue());
    torch::jit::Value *ints = insert_constant_at_top(*graph, c10::IValue(std::vector<int64_t>{1, 2}));
    ASSERT_TRUE(constant_tensor(tensor).has_value());
    EXPECT_TRUE(constant_tensor(tensor)->equal(at::ones({2})));
    EXPECT_FALSE(constant_tensor(input).has_value());
    EXPECT_FALSE(constant_tensor(flag).has_value());
    EXPECT_EQ(constant_bool(flag), false);
    EXPECT_TRUE(is_constant_none(none));
    EXPECT_FALSE(is_constant_none(input));
    EXPECT_EQ(constant_int_list(ints), (std::vector<int64_t>{1, 2}));
    graph->registerOutput(input);
    EXPECT_TRUE(is_graph_output(input));
    EXPECT_FALSE(is_graph_output(tensor));
}

TEST(GraphUtils, ConvolutionKindsAndTransposedFlag) {
    auto graph = std::make_shared<torch::jit::Graph>();
    torch::jit::parseIR(R"IR(
graph(%x : Tensor, %w : Tensor, %flag : bool):
  %none : NoneType = prim::Constant()
  %t : bool = prim::Constant[value=1]()
  %f : bool = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %ones : int[] = prim::ListConstruct(%one, %one)
  %zero : int = prim::Constant[value=0]()
  %zeros : int[] = prim::ListConstruct(%zero, %zero)
  %a : Tensor = aten::conv2d(%x, %w, %none, %ones, %zeros, %ones, %one)
  %b : Tensor = aten::conv_transpose2d(%x, %w, %none, %ones, %zeros, %zeros, %one, %ones)
  %c : Tensor = aten::_convolution(%x, %w, %none, %ones, %zeros, %ones, %t, %zeros, %one, %f, %f, %f, %f)
  %d : Tensor = aten::convolution(%x, %w, %none, %ones, %zeros, %ones, %f, %zeros, %one)
  %e : Tensor = aten::convolution(%x, %w, %none, %ones, %zeros, %ones, %flag, %zeros, %one)
  %g : Tensor = aten::linear(%x, %w, %none)
  return (%a, %b, %c, %d, %e, %g)
)IR",
                        graph.get());
    std::vector<std::optional<bool>> transposed;
    std::vector<bool> convs;
    for (torch::jit::Node *node : graph->nodes()) {
        if (node->kind() == c10::prim::Constant || node->kind() == c10::prim::ListConstruct) continue;
        convs.push_back(is_aten_conv(node));
        transposed.push_back(conv_transposed(node));
    }
    EXPECT_EQ(convs, (std::vector<bool>{true, true, true, true, true, false}));
    EXPECT_EQ(transposed, (std::vector<std::optional<bool>>{false, true, true, false, std::nullopt, std::nullopt}));
    EXPECT_EQ(aten_conv_kinds().size(), 8u);
}

}  // namespace
}  // namespace ipex::passes
