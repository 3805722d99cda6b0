// pool_int8_convolutions (quant/int8_grouping.h) on graphs of ipex::int8_op nodes: an int8
// convolution whose output only an ipex::int8_max_pool2d with constant arguments reads becomes one
// ipex::int8_conv_max_pool with the same output bits (taking in the quantize of an fp32 input made
// for it alone); a convolution read twice, a sum, a linear,
// a pooling with an argument that is not a constant stay as they are. dequantize_edges makes
// every aten::dequantize of one tensor an ipex::dequantize and leaves the list overload.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

#include "ops/int8/int8_context.h"
#include "quant/int8_grouping.h"

namespace ipex::quant {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

c10::intrusive_ptr<Int8Context> context(const std::string &kind, bool sum) {
    Int8Params p;
    p.kind = kind;
    if (kind == "conv2d") {
        p.stride = {2, 2};
        p.padding = {1, 1};
        p.dilation = {1, 1};
    }
    p.in_scale = p.out_scale = p.other_scale = 0.05;
    p.relu = true;
    p.sum = p.sum_relu = sum;
    const at::Tensor w = kind == "conv2d" ? at::randn({8, 3, 3, 3}) * 0.2 : at::randn({8, 3}) * 0.2;
    return c10::make_intrusive<Int8Context>(w, at::randn({8}) * 0.1, std::vector<double>(8, 0.002), p);
}

// x -> ipex::int8_op(_sum)(x[, x], ctx) -> ipex::int8_max_pool2d(3, 2, 1, 1, false) [-> also returned]
std::shared_ptr<Graph> build(const std::string &kind, bool sum, bool read_twice, bool kernel_is_input) {
    auto g = std::make_shared<Graph>();
    Value *x = g->addInput("x");
    Value *kernel_input = kernel_is_input ? g->addInput("k") : nullptr;
    const auto ctx = context(kind, sum);
    Value *c = g->insertConstant(c10::IValue(ctx));
    std::vector<Value *> conv_inputs{x};
    if (sum) conv_inputs.push_back(x);
    conv_inputs.push_back(c);
    Node *conv = g->insertNode(
        g->create(c10::Symbol::fromQualString(sum ? "ipex::int8_op_sum" : "ipex::int8_op"), conv_inputs));
    const auto list = [&](std::vector<int64_t> v) { return g->insertConstant(c10::IValue(v)); };
    Node *pool = g->insertNode(g->create(c10::Symbol::fromQualString("ipex::int8_max_pool2d"),
                                         {conv->output(), kernel_input ? kernel_input : list({3, 3}), list({2, 2}),
                                          list({1, 1}), list({1, 1}), g->insertConstant(false)}));
    g->registerOutput(pool->output());
    if (read_twice) g->registerOutput(conv->output());
    return g;
}

int count(const std::shared_ptr<Graph> &g, const char *kind) {
    int n = 0;
    for (const Node *node : g->nodes()) n += node->kind().toQualString() == std::string(kind);
    return n;
}

std::vector<c10::IValue> run(const std::shared_ptr<Graph> &g, std::vector<c10::IValue> inputs) {
    torch::jit::GraphFunction fn("forward", g->copy(), nullptr);
    fn.run(inputs);
    return inputs;
}

TEST(PoolInt8Convolutions, ConvolutionAndItsPoolingBecomeOneOp) {
    at::manual_seed(0);
    auto g = build("conv2d", false, false, false);
    const at::Tensor x = at::quantize_per_tensor(at::randn({3, 3, 40, 36}), 0.05, 0, at::kQUInt8)
                             .contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor want = run(g, {x})[0].toTensor();
    const passes::PassResult r = pool_int8_convolutions(g);
    EXPECT_EQ(r.count, 1);
    EXPECT_EQ(count(g, "ipex::int8_conv_max_pool"), 1);
    EXPECT_EQ(count(g, "ipex::int8_op"), 0);
    EXPECT_EQ(count(g, "ipex::int8_max_pool2d"), 0);
    const at::Tensor got = run(g, {x})[0].toTensor();
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr()));
    ASSERT_EQ(r.modules.size(), 1u);
}

// fp32 x -> ipex::quantize_per_tensor(x, scale, 0, quint8) [-> also returned] -> the graph above.
std::shared_ptr<Graph> build_from_float(double scale, bool quantized_read_twice) {
    auto g = build("conv2d", false, false, false);
    Value *x = g->inputs()[0];
    Node *conv = x->uses()[0].user;
    torch::jit::WithInsertPoint guard(conv);
    Value *q = g->insert(c10::Symbol::fromQualString("ipex::quantize_per_tensor"),
                         {x, scale, int64_t{0}, static_cast<int64_t>(at::kQUInt8)});
    conv->replaceInput(0, q);
    if (quantized_read_twice) g->registerOutput(q);
    return g;
}

// The quantize of the network's input made for the convolution alone goes into the op, which
// quantizes as it did: the same bits.
TEST(PoolInt8Convolutions, TakesTheQuantizeOfAnFp32Input) {
    at::manual_seed(2);
    auto g = build_from_float(0.05, false);
    const at::Tensor x = at::randn({2, 3, 40, 36});
    const at::Tensor want = run(g, {x})[0].toTensor();
    EXPECT_EQ(count(g, "ipex::quantize_per_tensor"), 1);
    const passes::PassResult r = pool_int8_convolutions(g);
    EXPECT_EQ(r.count, 1);
    EXPECT_EQ(r.details["fp32_inputs"], 1);
    EXPECT_EQ(count(g, "ipex::quantize_per_tensor"), 0);
    EXPECT_EQ(count(g, "ipex::int8_conv_max_pool"), 1);
    const at::Tensor got = run(g, {x})[0].toTensor();
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr()));
    // Kept: a quantize read elsewhere too, or one with other parameters than the context's input.
    for (const auto &[scale, twice] : std::vector<std::pair<double, bool>>{{0.05, true}, {0.06, false}}) {
        auto kept = build_from_float(scale, twice);
        const passes::PassResult k = pool_int8_convolutions(kept);
        EXPECT_EQ(k.count, 1);
        EXPECT_EQ(k.details["fp32_inputs"], 0);
        EXPECT_EQ(count(kept, "ipex::quantize_per_tensor"), 1) << scale << " " << twice;
    }
}

TEST(PoolInt8Convolutions, LeavesWhatItCannotTake) {
    at::manual_seed(1);
    struct Case {
        const char *what, *kind;
        bool sum, read_twice, kernel_is_input;
    };
    for (const Case &c : {Case{"output read twice", "conv2d", false, true, false},
                          Case{"a residual sum", "conv2d", true, false, false},
                          Case{"a linear", "linear", false, false, false},
                          Case{"a kernel size from the input", "conv2d", false, false, true}}) {
        auto g = build(c.kind, c.sum, c.read_twice, c.kernel_is_input);
        EXPECT_EQ(pool_int8_convolutions(g).count, 0) << c.what;
        EXPECT_EQ(count(g, "ipex::int8_conv_max_pool"), 0) << c.what;
        EXPECT_EQ(count(g, "ipex::int8_max_pool2d"), 1) << c.what;
    }
}

TEST(DequantizeEdges, EveryDequantizeOfOneTensorBecomesTheIpexOp) {
    auto g = std::make_shared<Graph>();
    Value *x = g->addInput("x");
    Value *y = g->addInput("y");
    x->setType(c10::TensorType::get());
    y->setType(c10::TensorType::get());
    std::vector<Value *> outputs;
    for (Value *v : {x, y}) {
        Node *dq = g->insertNode(g->create(c10::Symbol::aten("dequantize"), {v}));
        dq->output()->setType(c10::TensorType::get());
        outputs.push_back(dq->output());
    }
    Value *list = g->insertNode(g->createList(c10::TensorType::get(), {x, y}))->output();
    Node *both = g->insertNode(g->create(c10::Symbol::aten("dequantize"), {list}));
    both->output()->setType(c10::ListType::ofTensors());
    outputs.push_back(both->output());
    g->registerOutput(g->insertNode(g->createTuple(outputs))->output());
    const at::Tensor qx = at::quantize_per_tensor(at::randn({2, 8, 5, 5}), 0.05, 3, at::kQUInt8)
                              .contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor qy = at::quantize_per_tensor(at::randn({33}), 0.02, -4, at::kQInt8);
    const auto want = run(g, {qx, qy})[0].toTupleRef().elements();
    EXPECT_EQ(dequantize_edges(g).count, 2);
    EXPECT_EQ(count(g, "ipex::dequantize"), 2);
    EXPECT_EQ(count(g, "aten::dequantize"), 1);  // the list
    const auto got = run(g, {qx, qy})[0].toTupleRef().elements();
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[2].toTensorList().size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(at::equal(got[i].toTensor(), want[i].toTensor())) << i;
    EXPECT_TRUE(got[0].toTensor().is_contiguous(at::MemoryFormat::ChannelsLast));
}

}  // namespace
}  // namespace ipex::quant
