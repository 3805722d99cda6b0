// ipex::int8_map / ipex::int8_requantize_map against a naive lookup (each byte through the
// table, bit-exact) over shapes with tails, layouts and both dtypes, and against the ops they
// stand for; map_elementwise_chains (quant/elementwise_maps.h) on graphs: dequantize ->
// activations [-> quantize] becomes one lookup with the same outputs; what it cannot take stays.
// ipex::int8_cat_scale_shift against the ops it stands for (dequantize, cat, the affine, relu,
// quantize) within one quantization step, and fuse_int8_cat_norms on graphs.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "ops/own_kernels.h"
#include "quant/elementwise_maps.h"
#include "ops/int8/int8_quantize.h"

namespace ipex::quant {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
using graph_builder::add;
using graph_builder::count;
using graph_builder::run;

at::Tensor int8_map(const at::Tensor &q, const at::Tensor &table) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::int8_map", "")
                               .typed<at::Tensor(const at::Tensor &, const at::Tensor &)>();
    return op.call(q, table);
}

at::Tensor requantize_map(const at::Tensor &q, const at::Tensor &table, double scale, int64_t zp, at::ScalarType t) {
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("ipex::int8_requantize_map", "")
            .typed<at::Tensor(const at::Tensor &, const at::Tensor &, double, int64_t, at::ScalarType)>();
    return op.call(q, table, scale, zp, t);
}

// The stored bytes of q as indices 0-255, in q's logical order.
at::Tensor byte_index(const at::Tensor &q) {
    const at::Tensor ints = q.int_repr().to(at::kLong);
    return q.scalar_type() == at::kQInt8 ? (ints + 256) % 256 : ints;
}

std::vector<at::Tensor> layouts(const at::Tensor &q) {
    std::vector<at::Tensor> out{q};
    if (q.dim() == 4) {
        out.push_back(q.contiguous(at::MemoryFormat::ChannelsLast));
        out.push_back(q.narrow(3, 0, q.size(3) - 1));  // not dense
    }
    if (q.dim() == 3) out.push_back(q.transpose(1, 2));  // an NWC view
    return out;
}

TEST(Int8Map, LooksEveryByteUpOverShapesLayoutsAndTypes) {
    at::manual_seed(7);
    const std::vector<std::vector<int64_t>> shapes = {{1}, {15}, {16}, {17}, {63}, {64}, {65}, {1000},
                                                      {2, 9, 5}, {2, 3, 7, 5}, {2, 64, 9, 11}};
    const at::Tensor table = at::randn({256});
    const at::Tensor bytes = at::randint(0, 256, {256}, at::kInt).to(at::kByte);
    for (const auto &shape : shapes)
        for (at::ScalarType dtype : {at::kQUInt8, at::kQInt8}) {
            const int64_t zp = dtype == at::kQInt8 ? -3 : 5;
            const at::Tensor base = at::quantize_per_tensor(at::randn(shape) * 30, 0.1, zp, dtype);
            for (const at::Tensor &q : layouts(base)) {
                const std::string what = c10::str(q.sizes(), " strides ", q.strides(), " ", dtype);
                const at::Tensor index = byte_index(q);
                const at::Tensor got = int8_map(q, table);
                EXPECT_TRUE(at::equal(got, table.index({index}))) << what;
                if (q.is_non_overlapping_and_dense()) EXPECT_EQ(got.strides(), q.strides()) << what;
                const at::Tensor r = requantize_map(q, bytes, 0.25, 9, at::kQUInt8);
                EXPECT_EQ(r.scalar_type(), at::kQUInt8) << what;
                EXPECT_EQ(r.q_scale(), 0.25) << what;
                EXPECT_EQ(r.q_zero_point(), 9) << what;
                EXPECT_TRUE(at::equal(r.int_repr(), bytes.index({index}))) << what;
                if (q.is_non_overlapping_and_dense()) EXPECT_EQ(r.strides(), q.strides()) << what;
            }
        }
}

// The AVX-512 kernel's two byte paths (VBMI byte permutes, 32-bit permutes) and its fp32 path,
// every byte value and every tail length.
TEST(Int8Map, KernelPathsAgree) {
    if (!ops::own_kernels::available(false)) GTEST_SKIP() << "no AVX-512 on this CPU";
    std::vector<int32_t> table(256);
    for (int i = 0; i < 256; ++i) table[i] = (i * 37 + 11) % 256;
    std::vector<uint8_t> src(300);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>((i * 101 + 7) % 256);
    for (int64_t n : {1, 15, 16, 17, 63, 64, 65, 256, 300}) {
        for (bool vbmi : {true, false}) {
            std::vector<uint8_t> out(n + 1, 0xee);
            quantize_kernel::map_avx512(src.data(), table.data(), out.data(), n, true, vbmi);
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], table[src[i]]) << n << " " << vbmi << " " << i;
            EXPECT_EQ(out[n], 0xee) << "wrote past the end";
        }
        // fp32 values: every byte of each word differs from its neighbours' (the VBMI path looks
        // each byte up in its own plane).
        std::vector<int32_t> words(256);
        for (uint32_t i = 0; i < 256; ++i) words[i] = static_cast<int32_t>((i * 2654435761u) ^ (i << 7));
        for (bool vbmi : {true, false}) {
            std::vector<int32_t> wide(n + 1, -1);
            quantize_kernel::map_avx512(src.data(), words.data(), wide.data(), n, false, vbmi);
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(wide[i], words[src[i]]) << n << " " << vbmi << " " << i;
            EXPECT_EQ(wide[n], -1) << "wrote past the end";
        }
    }
}

// A table made of silu's values gives what dequantize -> silu gives; quantizing them as
// ipex::quantize_per_tensor does gives its bytes.
TEST(Int8Map, StandsForTheOpsItReplaces) {
    at::manual_seed(8);
    const at::Tensor q = at::quantize_per_tensor(at::randn({3, 16, 13, 13}) * 4, 0.05, 100, at::kQUInt8);
    const at::Tensor all = at::_make_per_tensor_quantized_tensor(at::arange(256, at::kInt).to(at::kByte), 0.05, 100);
    const at::Tensor table = at::silu(all.dequantize());
    const at::Tensor want = at::silu(q.dequantize());
    EXPECT_TRUE(at::allclose(int8_map(q, table), want, 1e-6, 0));
    static const auto quantize = c10::Dispatcher::singleton()
                                     .findSchemaOrThrow("ipex::quantize_per_tensor", "")
                                     .typed<at::Tensor(const at::Tensor &, double, int64_t, at::ScalarType)>();
    const at::Tensor bytes = quantize.call(table, 0.02, -10, at::kQInt8).int_repr().view(at::kByte);
    const at::Tensor got = requantize_map(q, bytes, 0.02, -10, at::kQInt8);
    const at::Tensor ref = quantize.call(want, 0.02, -10, at::kQInt8);
    EXPECT_LE((got.int_repr().to(at::kInt) - ref.int_repr().to(at::kInt)).abs().max().item<int>(), 1);
}

TEST(Int8Map, RejectsBadArguments) {
    const at::Tensor q = at::quantize_per_tensor(at::randn({4, 4}), 0.1, 0, at::kQUInt8);
    const at::Tensor table = at::zeros({256});
    const at::Tensor bytes = at::zeros({256}, at::kByte);
    EXPECT_THROW(int8_map(at::randn({4, 4}), table), c10::Error);
    EXPECT_THROW(int8_map(q, at::zeros({255})), c10::Error);
    EXPECT_THROW(int8_map(q, at::zeros({256}, at::kDouble)), c10::Error);
    EXPECT_THROW(int8_map(at::quantize_per_tensor(at::randn({4}), 0.1, 0, at::kQInt32), table), c10::Error);
    EXPECT_THROW(requantize_map(q, table, 0.1, 0, at::kQUInt8), c10::Error);  // fp32 table
    EXPECT_THROW(requantize_map(q, bytes, 0.1, 0, at::kFloat), c10::Error);
    EXPECT_THROW(requantize_map(q, bytes, 0.0, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(requantize_map(q, bytes, 0.1, 300, at::kQUInt8), c10::Error);
    EXPECT_THROW(requantize_map(q, bytes, 0.1, 128, at::kQInt8), c10::Error);
}

struct Built {
    std::shared_ptr<Graph> graph;
    Value *input;
};

// x (int8) -> dequantize -> silu_ -> hardtanh(-1, 3 or an input) -> [quantize | also returned]
Built build(bool quantized_end, bool end_read_twice, bool dequantized_read_twice, bool argument_is_input) {
    auto g = std::make_shared<Graph>();
    Value *x = g->addInput("x");
    Value *hi = argument_is_input ? g->addInput("hi") : g->insertConstant(3.0);
    x->setType(c10::TensorType::get());
    Node *dq = add(*g, "aten::dequantize", {x});
    Node *silu = add(*g, "aten::silu_", {dq->output()});
    Node *clamp = add(*g, "aten::hardtanh", {silu->output(), g->insertConstant(-1.0), hi});
    std::vector<Value *> outputs;
    Value *end = clamp->output();
    if (quantized_end) {
        outputs.push_back(add(*g, "ipex::quantize_per_tensor",
                              {end, g->insertConstant(0.02), g->insertConstant(int64_t{7}),
                               g->insertConstant(static_cast<int64_t>(at::kQUInt8))})
                              ->output());
    }
    if (!quantized_end || end_read_twice) outputs.push_back(add(*g, "aten::neg", {end})->output());
    if (dequantized_read_twice) outputs.push_back(dq->output());
    g->registerOutput(g->insertNode(g->createTuple(outputs))->output());
    return {g, x};
}

void expect_same(const std::vector<c10::IValue> &got, const std::vector<c10::IValue> &want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        const at::Tensor a = got[i].toTensor(), b = want[i].toTensor();
        if (a.is_quantized()) {
            EXPECT_EQ(a.q_scale(), b.q_scale());
            EXPECT_EQ(a.q_zero_point(), b.q_zero_point());
            EXPECT_TRUE(at::equal(a.int_repr(), b.int_repr())) << i;
        } else {
            EXPECT_TRUE(at::equal(a, b)) << i;
        }
    }
}

TEST(MapElementwiseChains, ChainsBecomeOneLookupWithTheSameOutputs) {
    at::manual_seed(9);
    const TensorQ xq{QDtype::u8, 0.05, 120, std::nullopt};
    const at::Tensor x = at::quantize_per_tensor(at::randn({2, 8, 11, 11}) * 3, xq.scale, xq.zero_point, at::kQUInt8)
                             .contiguous(at::MemoryFormat::ChannelsLast);
    struct Case {
        const char *what;
        bool quantized_end, read_twice;
        const char *made;
    };
    for (const Case &c : {Case{"quantized", true, false, "ipex::int8_requantize_map"},
                          Case{"read in fp32", false, false, "ipex::int8_map"},
                          Case{"quantized and read in fp32", true, true, "ipex::int8_map"}}) {
        Built b = build(c.quantized_end, c.read_twice, false, false);
        const auto want = run(b.graph, {x});
        const MapCounts n =
            map_elementwise_chains(*b.graph, [&](Value *v) { return v == b.input ? &xq : nullptr; });
        EXPECT_EQ(n.int8 + n.fp32, 1) << c.what;
        EXPECT_EQ(count(b.graph, c.made), 1) << c.what;
        for (const char *gone : {"aten::dequantize", "aten::silu_", "aten::hardtanh"})
            EXPECT_EQ(count(b.graph, gone), 0) << c.what << " " << gone;
        EXPECT_EQ(count(b.graph, "ipex::quantize_per_tensor"), c.quantized_end && c.read_twice ? 1 : 0) << c.what;
        expect_same(run(b.graph, {x}), want);
    }
}

TEST(MapElementwiseChains, LeavesWhatItCannotTake) {
    const TensorQ xq{QDtype::u8, 0.05, 120, std::nullopt};
    struct Case {
        const char *what;
        bool dequantized_read_twice, argument_is_input, known;
    };
    for (const Case &c : {Case{"the dequantized value read twice", true, false, true},
                          Case{"an argument from the input", false, true, true},
                          Case{"unknown parameters", false, false, false}}) {
        Built b = build(true, false, c.dequantized_read_twice, c.argument_is_input);
        const MapCounts n = map_elementwise_chains(
            *b.graph, [&](Value *v) { return v == b.input && c.known ? &xq : nullptr; });
        EXPECT_EQ(n.int8 + n.fp32, c.argument_is_input ? 1 : 0) << c.what;  // silu_ alone still maps
        EXPECT_EQ(count(b.graph, "aten::hardtanh"), 1) << c.what;
    }
    // gelu(x, approximate="cubic") throws when run: the chain stays, to fail as the model would.
    auto g = std::make_shared<Graph>();
    Value *x = g->addInput("x");
    x->setType(c10::TensorType::get());
    Node *dq = add(*g, "aten::dequantize", {x});
    Node *gelu = add(*g, "aten::gelu", {dq->output(), g->insertConstant(std::string("cubic"))});
    g->registerOutput(g->insertNode(g->createTuple({gelu->output()}))->output());
    const MapCounts n = map_elementwise_chains(*g, [&](Value *v) { return v == x ? &xq : nullptr; });
    EXPECT_EQ(n.int8 + n.fp32, 0);
    EXPECT_EQ(count(g, "aten::gelu"), 1);
}

at::Tensor cat_scale_shift(const std::vector<at::Tensor> &inputs, const at::Tensor &scale, const at::Tensor &shift,
                           bool relu, double out_scale, int64_t zp, at::ScalarType t) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::int8_cat_scale_shift", "")
                               .typed<at::Tensor(const std::vector<at::Tensor> &, const at::Tensor &,
                                                 const at::Tensor &, bool, double, int64_t, at::ScalarType)>();
    return op.call(inputs, scale, shift, relu, out_scale, zp, t);
}

// The ops one after the other, in fp32, quantized as aten does.
at::Tensor cat_scale_shift_reference(const std::vector<at::Tensor> &inputs, const at::Tensor &scale,
                                     const at::Tensor &shift, bool relu, double out_scale, int64_t zp,
                                     at::ScalarType t) {
    std::vector<at::Tensor> values;
    for (const at::Tensor &q : inputs) values.push_back(q.dequantize());
    const at::Tensor x = at::cat(values, 1);
    std::vector<int64_t> shape(x.dim(), 1);
    shape[1] = x.size(1);
    at::Tensor y = x * scale.view(shape) + shift.view(shape);
    if (relu) y = at::relu(y);
    return at::quantize_per_tensor(y, out_scale, zp, t);
}

void expect_within_one_step(const at::Tensor &got, const at::Tensor &want, const std::string &what) {
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << what;
    EXPECT_EQ(got.q_scale(), want.q_scale()) << what;
    EXPECT_EQ(got.q_zero_point(), want.q_zero_point()) << what;
    const at::Tensor diff = (got.int_repr().to(at::kInt) - want.int_repr().to(at::kInt)).abs();
    EXPECT_LE(diff.max().item<int>(), 1) << what;
    EXPECT_LE(diff.gt(0).sum().item<int64_t>(), std::max<int64_t>(2, want.numel() / 1000)) << what;  // rare ties
}

TEST(Int8CatScaleShift, MatchesTheOpsItStandsFor) {
    at::manual_seed(12);
    for (bool relu : {true, false})
        for (at::ScalarType out_type : {at::kQUInt8, at::kQInt8}) {
            // Channel counts around the vector width, both input dtypes, NCHW and channels-last inputs.
            std::vector<at::Tensor> inputs = {
                at::quantize_per_tensor(at::randn({2, 17, 5, 6}), 0.04, 100, at::kQUInt8),
                at::quantize_per_tensor(at::randn({2, 32, 5, 6}), 0.03, -7, at::kQInt8)
                    .contiguous(at::MemoryFormat::ChannelsLast),
                at::quantize_per_tensor(at::randn({2, 3, 5, 6}), 0.05, 0, at::kQUInt8)};
            const at::Tensor scale = at::rand({52}) + 0.5, shift = at::randn({52}) * 0.2;
            const int64_t zp = out_type == at::kQInt8 ? 5 : (relu ? 0 : 128);
            const std::string what = std::string(relu ? "relu " : "") + c10::toString(out_type);
            const at::Tensor got = cat_scale_shift(inputs, scale, shift, relu, 0.02, zp, out_type);
            EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
            expect_within_one_step(got, cat_scale_shift_reference(inputs, scale, shift, relu, 0.02, zp, out_type),
                                   what);
            const std::vector<at::Tensor> one = {inputs[0]};  // no cat
            expect_within_one_step(cat_scale_shift(one, scale.narrow(0, 0, 17), shift.narrow(0, 0, 17), relu, 0.02,
                                                   zp, out_type),
                                   cat_scale_shift_reference(one, scale.narrow(0, 0, 17), shift.narrow(0, 0, 17),
                                                             relu, 0.02, zp, out_type),
                                   what + " one input");
            const std::vector<at::Tensor> flat = {at::quantize_per_tensor(at::randn({3, 8}), 0.04, 9, at::kQUInt8)};
            expect_within_one_step(cat_scale_shift(flat, scale.narrow(0, 0, 8), shift.narrow(0, 0, 8), relu, 0.02,
                                                   zp, out_type),
                                   cat_scale_shift_reference(flat, scale.narrow(0, 0, 8), shift.narrow(0, 0, 8), relu,
                                                             0.02, zp, out_type),
                                   what + " 2-D");
        }
}

// A NaN shift makes its channel's affine NaN: the ReLU keeps it NaN (as aten's relu does) and
// the quantization gives it the type's lowest value, as aten's quantize_per_tensor does, with
// or without the ReLU and in the AVX-512 kernel as in the portable loop.
TEST(Int8CatScaleShift, NanShiftGivesTheLowestValue) {
    at::manual_seed(13);
    const std::vector<at::Tensor> inputs = {
        at::quantize_per_tensor(at::randn({2, 20, 3, 5}), 0.04, 100, at::kQUInt8),
        at::quantize_per_tensor(at::randn({2, 17, 3, 5}), 0.03, -7, at::kQInt8)};
    const at::Tensor scale = at::rand({37}) + 0.5;
    at::Tensor shift = at::randn({37}) * 0.2;
    for (int64_t c : {0, 18, 36}) shift[c] = std::numeric_limits<float>::quiet_NaN();
    for (bool relu : {true, false})
        for (at::ScalarType out_type : {at::kQUInt8, at::kQInt8}) {
            const int64_t zp = out_type == at::kQInt8 ? 5 : 3;  // above the lowest value: a ReLU's floor shows
            const std::string what = std::string(relu ? "relu " : "") + c10::toString(out_type);
            const at::Tensor got = cat_scale_shift(inputs, scale, shift, relu, 0.02, zp, out_type);
            const at::Tensor want = cat_scale_shift_reference(inputs, scale, shift, relu, 0.02, zp, out_type);
            const int lowest = out_type == at::kQInt8 ? -128 : 0;
            const auto all_lowest = [&](const at::Tensor &q, int64_t c) {
                return q.int_repr().select(1, c).to(at::kInt).eq(lowest).all().item<bool>();
            };
            for (int64_t c : {0, 18, 36}) {
                EXPECT_TRUE(all_lowest(got, c)) << what << " " << c;
                EXPECT_TRUE(all_lowest(want, c)) << what << " aten, " << c;
            }
            expect_within_one_step(got, want, what);
        }
}

TEST(Int8CatScaleShift, RejectsBadArguments) {
    const at::Tensor q = at::quantize_per_tensor(at::randn({1, 4, 3, 3}), 0.1, 0, at::kQUInt8);
    const at::Tensor other = at::quantize_per_tensor(at::randn({1, 4, 2, 3}), 0.1, 0, at::kQUInt8);
    const at::Tensor s = at::ones({4}), s8 = at::ones({8});
    EXPECT_THROW(cat_scale_shift({}, s, s, false, 0.1, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(cat_scale_shift({q}, s8, s8, false, 0.1, 0, at::kQUInt8), c10::Error);  // 8 for 4 channels
    EXPECT_THROW(cat_scale_shift({q, other}, s8, s8, false, 0.1, 0, at::kQUInt8), c10::Error);  // sizes
    EXPECT_THROW(cat_scale_shift({at::randn({1, 4, 3, 3})}, s, s, false, 0.1, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(cat_scale_shift({q}, s, s, false, 0.0, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(cat_scale_shift({q}, s, s, false, 0.1, 200, at::kQInt8), c10::Error);
    EXPECT_THROW(cat_scale_shift({q}, s, s, false, 0.1, 0, at::kFloat), c10::Error);
}

// a, b (int8) -> dequantize each -> cat(dim) -> batch_norm(constants) -> relu -> quantize
std::shared_ptr<Graph> build_norm(int64_t dim, bool training, bool relu) {
    auto g = std::make_shared<Graph>();
    Value *a = g->addInput("a");
    Value *b = g->addInput("b");
    a->setType(c10::TensorType::get());
    b->setType(c10::TensorType::get());
    Value *da = add(*g, "aten::dequantize", {a})->output();
    Value *db = add(*g, "aten::dequantize", {b})->output();
    Value *list = g->insertNode(g->createList(c10::TensorType::get(), {da, db}))->output();
    Value *x = add(*g, "aten::cat", {list, g->insertConstant(dim)})->output();
    const auto c = [&](const at::Tensor &t) { return g->insertConstant(t); };
    Value *y = add(*g, "aten::batch_norm",
                   {x, c(at::rand({12}) + 0.5), c(at::randn({12})), c(at::randn({12}) * 0.1), c(at::rand({12}) + 0.5),
                    g->insertConstant(training), g->insertConstant(0.1), g->insertConstant(1e-5),
                    g->insertConstant(false)})
                   ->output();
    if (relu) y = add(*g, "aten::relu", {y})->output();
    // Zero point 20: a relu left out would show (values below zero kept down to -20 steps).
    Value *q = add(*g, "ipex::quantize_per_tensor",
                   {y, g->insertConstant(0.03), g->insertConstant(int64_t{20}),
                    g->insertConstant(static_cast<int64_t>(at::kQUInt8))})
                   ->output();
    g->registerOutput(g->insertNode(g->createTuple({q}))->output());
    return g;
}

TEST(FuseInt8CatNorms, CatNormReluQuantizeBecomesOneOp) {
    at::manual_seed(13);
    const TensorQ qa{QDtype::u8, 0.04, 10, std::nullopt}, qb{QDtype::s8, 0.05, -3, std::nullopt};
    const at::Tensor a = at::quantize_per_tensor(at::randn({2, 5, 7, 7}), qa.scale, qa.zero_point, at::kQUInt8)
                             .contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor b = at::quantize_per_tensor(at::randn({2, 7, 7, 7}), qb.scale, qb.zero_point, at::kQInt8)
                             .contiguous(at::MemoryFormat::ChannelsLast);
    for (bool relu : {true, false}) {
        auto g = build_norm(1, false, relu);
        const at::Tensor want = run(g, {a, b})[0].toTensor();
        const auto params = [&](Value *v) -> const TensorQ * {
            return v == g->inputs()[0] ? &qa : v == g->inputs()[1] ? &qb : nullptr;
        };
        EXPECT_EQ(fuse_int8_cat_norms(*g, params), 1);
        torch::jit::EliminateDeadCode(g);
        EXPECT_EQ(count(g, "ipex::int8_cat_scale_shift"), 1);
        for (const char *gone : {"aten::dequantize", "aten::cat", "aten::batch_norm", "aten::relu",
                                 "ipex::quantize_per_tensor"})
            EXPECT_EQ(count(g, gone), 0) << gone;
        expect_within_one_step(run(g, {a, b})[0].toTensor(), want, relu ? "relu" : "no relu");
    }
    struct Case {
        const char *what;
        int64_t dim;
        bool training, known;
    };
    for (const Case &c : {Case{"cat on dim 2", 2, false, true}, Case{"training", 1, true, true},
                          Case{"unknown parameters", 1, false, false}}) {
        auto g = build_norm(c.dim, c.training, true);
        const auto params = [&](Value *v) -> const TensorQ * { return c.known ? &qa : nullptr; };
        EXPECT_EQ(fuse_int8_cat_norms(*g, params), 0) << c.what;
        EXPECT_EQ(count(g, "aten::batch_norm"), 1) << c.what;
    }
}

}  // namespace
}  // namespace ipex::quant
