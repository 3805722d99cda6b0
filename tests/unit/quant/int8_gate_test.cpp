// ipex::int8_map_mean and ipex::int8_map_gate against the ops they stand for (the table lookup,
// then aten's mean / adaptive average pooling, or the product and ipex::quantize_per_tensor) over
// shapes with channel tails, NCHW and channels-last inputs, both dtypes, a table and a
// dequantize's own values, gates of several broadcast shapes and the fallbacks; and
// fuse_int8_gates (quant/elementwise_maps.h) on squeeze-excite graphs.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <cstring>
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

at::Tensor map_mean(const at::Tensor &q, const at::Tensor &table, std::vector<int64_t> dim, bool keepdim) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::int8_map_mean", "")
                               .typed<at::Tensor(const at::Tensor &, const at::Tensor &, at::IntArrayRef, bool)>();
    return op.call(q, table, dim, keepdim);
}

at::Tensor map_gate(const at::Tensor &q, const at::Tensor &table, const at::Tensor &gate, double scale, int64_t zp,
                    at::ScalarType t) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::int8_map_gate", "")
                               .typed<at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &, double,
                                                 int64_t, at::ScalarType)>();
    return op.call(q, table, gate, scale, zp, t);
}

at::Tensor quantize(const at::Tensor &x, double scale, int64_t zp, at::ScalarType t) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::quantize_per_tensor", "")
                               .typed<at::Tensor(const at::Tensor &, double, int64_t, at::ScalarType)>();
    return op.call(x, scale, zp, t);
}

// The fp32 values q stands for through the table, looked up naively (bytes as indices 0-255).
at::Tensor looked_up(const at::Tensor &q, const at::Tensor &table) {
    at::Tensor index = q.int_repr().to(at::kLong);
    if (q.scalar_type() == at::kQInt8) index = (index + 256) % 256;
    return table.index({index});
}

at::Tensor dequantize_table(double scale, int64_t zp, bool is_signed) {
    const at::Tensor bytes = at::arange(256, at::kInt);
    const at::Tensor values = is_signed ? bytes.to(at::kChar).to(at::kInt) : bytes;
    return (values - static_cast<int32_t>(zp)).to(at::kFloat) * static_cast<float>(scale);
}

struct Input {
    at::Tensor q, table;
    std::string what;
};

// Both layouts, both dtypes, a random table and the input's own dequantized values.
std::vector<Input> inputs(const std::vector<int64_t> &shape) {
    std::vector<Input> out;
    for (at::ScalarType dtype : {at::kQUInt8, at::kQInt8})
        for (bool channels_last : {false, true})
            for (bool dequantized : {false, true}) {
                const int64_t zp = dtype == at::kQInt8 ? -5 : 17;
                at::Tensor q = at::quantize_per_tensor(at::randn(shape) * 2, 0.03, zp, dtype);
                if (channels_last) q = q.contiguous(at::MemoryFormat::ChannelsLast);
                const at::Tensor table =
                    dequantized ? dequantize_table(0.03, zp, dtype == at::kQInt8) : at::randn({256});
                out.push_back({q, table,
                               c10::str(shape, " ", dtype, channels_last ? " channels-last" : " NCHW",
                                        dequantized ? " dequantize" : " table")});
            }
    return out;
}

const std::vector<std::vector<int64_t>> kShapes = {{1, 1, 1, 1}, {2, 3, 5, 4},  {1, 16, 7, 7},  {2, 17, 3, 9},
                                                   {3, 64, 4, 4}, {2, 65, 5, 3}, {1, 130, 9, 8}, {2, 200, 1, 1}};

TEST(Int8MapMean, MatchesTheMeanOfTheLookup) {
    at::manual_seed(21);
    for (const auto &shape : kShapes)
        for (const Input &in : inputs(shape)) {
            const at::Tensor values = looked_up(in.q, in.table).contiguous(in.q.suggest_memory_format());
            // Against a sum in fp64, and aten's own (which sums in another order) within rounding.
            const at::Tensor exact = values.to(at::kDouble).mean({2, 3}, true).to(at::kFloat);
            const at::Tensor pooled = at::adaptive_avg_pool2d(values, {1, 1});
            const at::Tensor got = map_mean(in.q, in.table, {-2, -1}, true);
            ASSERT_EQ(got.sizes(), pooled.sizes()) << in.what;
            EXPECT_TRUE(at::allclose(got, exact, 1e-5, 1e-6)) << in.what;
            EXPECT_TRUE(at::allclose(got, pooled, 1e-5, 1e-6)) << in.what;
            const at::Tensor flat = map_mean(in.q, in.table, {3, 2}, false);
            ASSERT_EQ(flat.sizes(), at::IntArrayRef({shape[0], shape[1]})) << in.what;
            EXPECT_TRUE(at::allclose(flat, values.mean({2, 3}), 1e-5, 1e-6)) << in.what;
        }
}

TEST(Int8MapMean, OtherDimsAndRanksRunTheOps) {
    at::manual_seed(22);
    const at::Tensor table = at::randn({256});
    const at::Tensor q4 = at::quantize_per_tensor(at::randn({2, 5, 6, 7}), 0.05, 3, at::kQUInt8);
    EXPECT_TRUE(at::allclose(map_mean(q4, table, {1, 2}, true), looked_up(q4, table).mean({1, 2}, true)));
    const at::Tensor q3 = at::quantize_per_tensor(at::randn({5, 6, 7}), 0.05, 3, at::kQUInt8);
    EXPECT_TRUE(at::allclose(map_mean(q3, table, {-2, -1}, true), looked_up(q3, table).mean({-2, -1}, true)));
    const at::Tensor sliced = q4.narrow(3, 1, 5);  // not dense: copied first
    EXPECT_TRUE(at::allclose(map_mean(sliced, table, {2, 3}, false), looked_up(sliced, table).mean({2, 3})));
}

TEST(Int8MapGate, MatchesTheProductQuantized) {
    at::manual_seed(23);
    for (const auto &shape : kShapes)
        for (const Input &in : inputs(shape))
            for (at::ScalarType out_type : {at::kQUInt8, at::kQInt8}) {
                const int64_t zp = out_type == at::kQInt8 ? 4 : 120;
                const at::Tensor values = looked_up(in.q, in.table);
                // One value per image and channel, per channel only, as [C, 1, 1], one for all.
                for (const at::Tensor &gate :
                     {at::rand({shape[0], shape[1], 1, 1}) * 2 - 0.5, at::rand({1, shape[1], 1, 1}),
                      at::rand({shape[1], 1, 1}), at::rand({}) + 0.5,
                      at::rand({shape[0], shape[1], 1, 1}).contiguous(at::MemoryFormat::ChannelsLast)}) {
                    const std::string what = c10::str(in.what, " gate ", gate.sizes(), " -> ", out_type);
                    const at::Tensor want = quantize(values * gate, 0.02, zp, out_type);
                    const at::Tensor got = map_gate(in.q, in.table, gate, 0.02, zp, out_type);
                    ASSERT_EQ(got.sizes(), want.sizes()) << what;
                    EXPECT_EQ(got.scalar_type(), out_type) << what;
                    EXPECT_EQ(got.q_scale(), 0.02) << what;
                    EXPECT_EQ(got.q_zero_point(), zp) << what;
                    EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr())) << what;
                    if (shape[1] > 1 && shape[2] * shape[3] > 1)
                        EXPECT_EQ(got.is_contiguous(at::MemoryFormat::ChannelsLast),
                                  in.q.is_contiguous(at::MemoryFormat::ChannelsLast))
                            << what;
                }
            }
}

TEST(Int8MapGate, OtherGatesAndLayoutsRunTheOps) {
    at::manual_seed(24);
    const at::Tensor table = at::randn({256});
    const at::Tensor q = at::quantize_per_tensor(at::randn({2, 5, 6, 7}), 0.05, 3, at::kQUInt8);
    struct Case {
        const char *what;
        at::Tensor q, gate;
    };
    for (const Case &c : {Case{"a gate per pixel", q, at::rand({2, 1, 6, 7})},
                          Case{"a full gate", q, at::rand({2, 5, 6, 7})},
                          Case{"a double gate", q, at::rand({2, 5, 1, 1}, at::kDouble)},
                          Case{"a 3-D input", q[0], at::rand({5, 1, 1})},
                          Case{"a strided input", q.transpose(2, 3), at::rand({2, 5, 1, 1})}}) {
        const at::Tensor v = looked_up(c.q, table);
        const at::Tensor want = quantize(v * c.gate, 0.02, 100, at::kQUInt8);
        const at::Tensor got = map_gate(c.q, table, c.gate, 0.02, 100, at::kQUInt8);
        ASSERT_EQ(got.sizes(), want.sizes()) << c.what;
        EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr())) << c.what;
    }
}

// The gate and sum kernels on `channels`-wide rows (0: one gate for all) against loops over the
// values each byte stands for (a random table, or a dequantize's values when affine).
void check_kernels(bool vbmi, bool affine, int64_t channels) {
    const std::string what = c10::str("vbmi ", vbmi, " affine ", affine, " channels ", channels);
    const at::Tensor table = at::randn({256});
    std::vector<int32_t> words(256);
    std::memcpy(words.data(), table.data_ptr<float>(), sizeof(float) * 256);
    std::vector<float> value_of(256);  // what byte b stands for, rounded on its own
    for (int b = 0; b < 256; ++b) value_of[b] = affine ? static_cast<float>(b - 9) * 0.04f : table[b].item<float>();
    quantize_kernel::ByteValues v;
    v.table = words.data();
    v.affine = affine;
    v.zero_point = 9;
    v.scale = 0.04f;
    const quantize_kernel::Params p = quantize_kernel::params_for(0.01, 7, false);
    const int64_t n = channels ? channels * 37 : 1500;
    const at::Tensor src = at::randint(0, 256, {n + 1}, at::kInt).to(at::kByte);
    const at::Tensor gate = at::rand({std::max<int64_t>(channels, 1)});
    const auto *in = src.data_ptr<uint8_t>();
    std::vector<uint8_t> dst(n + 1, 0xab);
    quantize_kernel::map_gate_avx512(in, dst.data(), n, channels, gate.data_ptr<float>(), v, p, vbmi);
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[channels ? i % channels : 0].item<float>();
        ASSERT_EQ(dst[i], quantize_kernel::quantize_value(value_of[in[i]] * g, p)) << what << " value " << i;
    }
    EXPECT_EQ(dst[n], 0xab) << what << ": written past the end";
    if (channels == 0 || channels > 64) return;
    std::vector<float> sums(65, -1.f);
    quantize_kernel::map_channel_sums_avx512(in, channels, n / channels, channels, v, sums.data(), vbmi);
    for (int64_t c = 0; c < channels; ++c) {
        float sum = 0.f;
        for (int64_t px = 0; px < n / channels; ++px) sum += value_of[in[px * channels + c]];
        EXPECT_EQ(sums[c], sum) << what << " channel " << c;
    }
    EXPECT_EQ(sums[channels], -1.f) << what << ": summed past the channels";
}

TEST(Int8MapGate, KernelsAgreeWithThePortableLoopsOverEveryTail) {
    if (!ops::own_kernels::available(false)) GTEST_SKIP() << "no AVX-512 on this CPU";
    at::manual_seed(25);
    for (bool vbmi : {true, false})  // without VBMI, or on a CPU without it, the 32-bit permutes
        for (bool affine : {false, true})
            for (int64_t channels : {0, 1, 15, 16, 17, 40, 63, 64}) check_kernels(vbmi, affine, channels);
}

TEST(Int8MapGate, RejectsBadArguments) {
    const at::Tensor q = at::quantize_per_tensor(at::randn({1, 4, 2, 2}), 0.1, 0, at::kQUInt8);
    const at::Tensor table = at::zeros({256}), gate = at::ones({1, 4, 1, 1});
    EXPECT_THROW(map_gate(at::randn({1, 4, 2, 2}), table, gate, 0.1, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(map_gate(q, at::zeros({255}), gate, 0.1, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(map_gate(q, at::zeros({256}, at::kByte), gate, 0.1, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(map_gate(q, table, gate, 0.0, 0, at::kQUInt8), c10::Error);
    EXPECT_THROW(map_gate(q, table, gate, 0.1, 256, at::kQUInt8), c10::Error);
    EXPECT_THROW(map_gate(q, table, gate, 0.1, 0, at::kFloat), c10::Error);
    EXPECT_THROW(map_gate(q, table, at::ones({1, 3, 1, 1}), 0.1, 0, at::kQUInt8), c10::Error);  // aten's error
    EXPECT_THROW(map_mean(at::randn({1, 4, 2, 2}), table, {2, 3}, true), c10::Error);
    EXPECT_THROW(map_mean(q, at::zeros({256}, at::kDouble), {2, 3}, true), c10::Error);
}

Value *quantize_node(Graph &g, Value *v, double scale, int64_t zp) {
    return add(g, "ipex::quantize_per_tensor",
               {v, g.insertConstant(scale), g.insertConstant(zp), g.insertConstant(static_cast<int64_t>(at::kQUInt8))})
        ->output();
}

enum class Source { map, dequantize };
enum class Pool { adaptive, mean_keepdim };

// x (int8) -> s = int8_map(x, silu table) | dequantize(x); m = pool(s); gate = sigmoid(m * w);
// quantize(gate * s) [and s read elsewhere]
std::shared_ptr<Graph> squeeze_excite(Source source, Pool pool, bool s_read_elsewhere, bool in_place_write) {
    auto g = std::make_shared<Graph>();
    Value *x = g->addInput("x");
    x->setType(c10::TensorType::get());
    Value *s = source == Source::map
                   ? add(*g, "ipex::int8_map", {x, g->insertConstant(at::silu(dequantize_table(0.05, 60, false)))})
                         ->output()
                   : add(*g, "aten::dequantize", {x})->output();
    Value *m = nullptr;
    if (pool == Pool::adaptive) {
        Value *one = g->insertConstant(int64_t{1});
        Value *size = g->insertNode(g->createList(c10::IntType::get(), {one, one}))->output();
        m = add(*g, "aten::adaptive_avg_pool2d", {s, size})->output();
    } else {
        m = add(*g, "aten::mean",
                {s, g->insertConstant(std::vector<int64_t>{2, 3}), g->insertConstant(true),
                 g->insertConstant(c10::IValue())})
                ->output();
    }
    Value *weight = g->insertConstant(at::full({1, 6, 1, 1}, 1.5));
    Value *gate = add(*g, "aten::sigmoid", {add(*g, "aten::mul", {m, weight})->output()})->output();
    if (in_place_write) add(*g, "aten::relu_", {s});
    std::vector<Value *> outputs{quantize_node(*g, add(*g, "aten::mul", {gate, s})->output(), 0.02, 10)};
    if (s_read_elsewhere) outputs.push_back(add(*g, "aten::neg", {s})->output());
    g->registerOutput(g->insertNode(g->createTuple(outputs))->output());
    return g;
}

TEST(FuseInt8Gates, SqueezeExciteReadsTheInt8Values) {
    at::manual_seed(26);
    const TensorQ xq{QDtype::u8, 0.05, 60, std::nullopt};
    const at::Tensor x = at::quantize_per_tensor(at::randn({2, 6, 9, 9}) * 2, 0.05, 60, at::kQUInt8)
                             .contiguous(at::MemoryFormat::ChannelsLast);
    for (Source source : {Source::map, Source::dequantize})
        for (Pool pool : {Pool::adaptive, Pool::mean_keepdim})
            for (bool elsewhere : {false, true}) {
                const std::string what = c10::str(source == Source::map ? "map" : "dequantize",
                                                  pool == Pool::adaptive ? " adaptive pool" : " mean",
                                                  elsewhere ? " s read elsewhere" : "");
                auto g = squeeze_excite(source, pool, elsewhere, false);
                const auto want = run(g, {x});
                const GateCounts n = fuse_int8_gates(*g, [&](Value *v) { return v == g->inputs()[0] ? &xq : nullptr; });
                torch::jit::EliminateDeadCode(g);
                EXPECT_EQ(n.means, 1) << what;
                EXPECT_EQ(n.products, 1) << what;
                EXPECT_EQ(count(g, "ipex::int8_map_mean"), 1) << what;
                EXPECT_EQ(count(g, "ipex::int8_map_gate"), 1) << what;
                for (const char *gone : {"aten::adaptive_avg_pool2d", "aten::mean", "ipex::quantize_per_tensor"})
                    EXPECT_EQ(count(g, gone), 0) << what << " " << gone;
                // The mapped value stays only for its other reader.
                EXPECT_EQ(count(g, "ipex::int8_map") + count(g, "aten::dequantize"), elsewhere ? 1 : 0) << what;
                const auto got = run(g, {x});
                const at::Tensor a = got[0].toTensor(), b = want[0].toTensor();
                EXPECT_EQ(a.q_scale(), b.q_scale()) << what;
                EXPECT_EQ(a.q_zero_point(), b.q_zero_point()) << what;
                const at::Tensor diff = (a.int_repr().to(at::kInt) - b.int_repr().to(at::kInt)).abs();
                // The mean's sum order differs from aten's: a gate can round the other way.
                EXPECT_LE(diff.max().item<int>(), 1) << what;
                EXPECT_LE(diff.gt(0).sum().item<int64_t>(), 2) << what;
                if (elsewhere) EXPECT_TRUE(at::equal(got[1].toTensor(), want[1].toTensor())) << what;
            }
}

TEST(FuseInt8Gates, LeavesWhatItCannotTake) {
    const TensorQ xq{QDtype::u8, 0.05, 60, std::nullopt};
    // An in-place op writes the mapped value: its readers stay.
    auto g = squeeze_excite(Source::map, Pool::adaptive, false, true);
    GateCounts n = fuse_int8_gates(*g, [&](Value *v) { return v == g->inputs()[0] ? &xq : nullptr; });
    EXPECT_EQ(n.means + n.products, 0);
    // A dequantize of unknown parameters.
    g = squeeze_excite(Source::dequantize, Pool::adaptive, false, false);
    n = fuse_int8_gates(*g, [](Value *) { return nullptr; });
    EXPECT_EQ(n.means + n.products, 0);
    EXPECT_EQ(count(g, "aten::adaptive_avg_pool2d"), 1);
    // A product read by something else than a quantize, a pool to 2x2, a mean over one dim.
    auto h = std::make_shared<Graph>();
    Value *x = h->addInput("x");
    x->setType(c10::TensorType::get());
    Value *s = add(*h, "aten::dequantize", {x})->output();
    Value *two = h->insertConstant(int64_t{2});
    Value *size = h->insertNode(h->createList(c10::IntType::get(), {two, two}))->output();
    Value *pooled = add(*h, "aten::adaptive_avg_pool2d", {s, size})->output();
    Value *mean = add(*h, "aten::mean", {s, h->insertConstant(std::vector<int64_t>{2}), h->insertConstant(false),
                                          h->insertConstant(c10::IValue())})
                      ->output();
    Value *product = add(*h, "aten::mul", {s, h->addInput("g")})->output();
    h->registerOutput(h->insertNode(h->createTuple({pooled, mean, product}))->output());
    n = fuse_int8_gates(*h, [&](Value *v) { return v == x ? &xq : nullptr; });
    EXPECT_EQ(n.means + n.products, 0);
    EXPECT_EQ(count(h, "aten::dequantize"), 1);
}

}  // namespace
}  // namespace ipex::quant
