// Pickled contexts: state() -> from_state() round trips, malformed states rejected with
// c10::Error, and TorchScript modules holding contexts saved and loaded again.
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/custom_class.h>

#include <sstream>

#include "ops/ops.h"
#include "unit/ops/ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using ConvPtr = c10::intrusive_ptr<ConvolutionContext>;
using LinearPtr = c10::intrusive_ptr<LinearContext>;

class OpsSerialization : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(5); }
};

// bf16 where oneDNN has it (AVX-512 CPUs), else fp32: what the state keeps is the same.
std::string lowp_dtype() { return ipex::testing::onednn_lacks("bf16").empty() ? "bf16" : "fp32"; }

ConvPtr make_conv(const std::string &dtype, PostOps ops = {{"relu"}}) {
    return c10::make_intrusive<ConvolutionContext>(at::randn({8, 2, 3, 3}) * 0.3, at::randn({8}),
                                                   ConvParams{{2, 1}, {1, 0}, {1, 2}, {}, 2, false}, dtype,
                                                   std::move(ops), false, std::vector<int64_t>{1, 4, 9, 11});
}

TEST_F(OpsSerialization, ConvStateRoundTrip) {
    // A fixed kernel choice: the timed one may differ between two contexts (a trailing sigmoid
    // runs fused in oneDNN or after it), and this compares their bits.
    const testing::KernelChoice fixed("0");
    for (const std::string dtype : {"fp32", "bf32", "bf16"}) {
        if (!ipex::testing::onednn_runs(dtype)) continue;
        const auto ctx = make_conv(dtype, {{"clip", -0.5, 2.0}, {"sigmoid"}});
        const auto back = ConvolutionContext::from_state(ctx->state());
        EXPECT_EQ(back->describe(), ctx->describe());
        EXPECT_EQ(back->dtype(), dtype);
        const at::Tensor x = at::randn({3, 4, 9, 11});
        EXPECT_TRUE(back->run(x, c10::nullopt).equal(ctx->run(x, c10::nullopt))) << dtype;
    }
    // Transposed with output padding, no bias, sum in place and an input hint.
    auto t = c10::make_intrusive<ConvolutionContext>(at::randn({4, 3, 3, 3, 3}), c10::nullopt,
                                                     ConvParams{{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 0, 1}, 1, true},
                                                     "fp32", PostOps{{"sum", 0.25}, {"elu", 0.5}}, true,
                                                     std::vector<int64_t>{});
    const auto state = t->state();
    EXPECT_TRUE(std::get<2>(state).empty());
    EXPECT_TRUE(std::get<12>(state));
    const auto back = ConvolutionContext::from_state(state);
    EXPECT_TRUE(back->params().transposed);
    EXPECT_EQ(back->params().output_padding, (std::vector<int64_t>{1, 0, 1}));
    const at::Tensor x = at::randn({2, 4, 3, 4, 5});
    const at::Tensor other = at::randn({2, 3, 6, 7, 10});
    EXPECT_TRUE(back->run(x, other).equal(t->run(x, other)));
}

TEST_F(OpsSerialization, LinearStateRoundTrip) {
    for (const std::string dtype : {"fp32", "bf32", "bf16"}) {
        if (!ipex::testing::onednn_runs(dtype)) continue;
        auto ctx = c10::make_intrusive<LinearContext>(at::randn({12, 20}), at::randn({12}), dtype,
                                                      PostOps{{"gelu_tanh"}, {"add"}}, 7);
        const auto back = LinearContext::from_state(ctx->state());
        EXPECT_EQ(back->describe(), ctx->describe());
        const at::Tensor x = at::randn({7, 20}), other = at::randn({7, 12});
        EXPECT_TRUE(back->run(x, other).equal(ctx->run(x, other))) << dtype;
    }
}

template <size_t I, class State, class Value>
State with(State s, Value v) {
    std::get<I>(s) = std::move(v);
    return s;
}

TEST_F(OpsSerialization, MalformedConvStatesThrow) {
    const auto good = make_conv("fp32")->state();
    const auto expect_error = [](const ConvolutionContext::State &state, const std::string &needle) {
        const std::string msg = testing::error_of([&] { ConvolutionContext::from_state(state); });
        EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "', got: " << msg;
    };
    expect_error(with<0>(good, int64_t{3}), "version 3 is not supported");
    expect_error(with<14>(good, std::vector<std::vector<int64_t>>{{2, 1, 4, 9, 11}}), "is not [0 or 1, 4 input sizes]");
    expect_error(with<14>(good, std::vector<std::vector<int64_t>>{{1, 4, 9, 11}}), "is not [0 or 1, 4 input sizes]");
    expect_error(with<14>(good, std::vector<std::vector<int64_t>>{{}}), "is not [0 or 1, 4 input sizes]");
    expect_error(with<14>(good, std::vector<std::vector<int64_t>>{{0, 1, 4, 0, 11}}), "input sizes [1, 4, 0, 11]");
    expect_error(with<10>(good, std::vector<std::string>{"relu9"}), "unknown post-op 'relu9'");
    expect_error(with<11>(good, std::vector<double>{0.0, 0.0, 1.0}), "post-op parameters do not match");
    expect_error(with<1>(good, at::randn({8, 2})), "3-D to 5-D");
    expect_error(with<2>(good, std::vector<at::Tensor>{at::randn({5})}), "does not match 8 output channels");
    expect_error(with<2>(good, std::vector<at::Tensor>{at::randn({8}), at::randn({8})}), "2 bias tensors");
    expect_error(with<3>(good, std::vector<int64_t>{1, 1, 1}), "stride has 3 values");
    expect_error(with<5>(good, std::vector<int64_t>{0, 1}), "dilation value 0");
    expect_error(with<7>(good, int64_t{3}), "groups");
    expect_error(with<7>(good, int64_t{0}), "groups is 0, must be >= 1");
    expect_error(with<9>(good, std::string("int4")), "unknown compute dtype 'int4'");
    expect_error(with<13>(good, std::vector<int64_t>{1, 4, 9}), "input hint");
    expect_error(with<10>(with<11>(good, std::vector<double>{1, 0, 1, 0}), std::vector<std::string>{"sum", "sum"}),
                 "at most one");
}

// What a saved model hands __setstate__: a tuple of version 1 (before recorded kernel choices)
// or 2; anything else is a clear error.
TEST_F(OpsSerialization, SavedConvStatesOfBothVersions) {
    const testing::KernelChoice fixed("0");
    const auto ctx = make_conv(lowp_dtype(), {{"silu"}});
    ctx->record_kernel({1, 4, 9, 11}, true);
    const auto v2 = ctx->state();
    const auto back = ConvolutionContext::from_saved(c10::IValue(v2));
    EXPECT_EQ(back->recorded_kernels(), ctx->recorded_kernels());
    EXPECT_EQ(back->describe(), ctx->describe());
    // Version 1: the same items without the last.
    const auto items = c10::IValue(v2).toTupleRef().elements().vec();
    const auto tuple_of = [](std::vector<c10::IValue> v) { return c10::IValue(c10::ivalue::Tuple::create(std::move(v))); };
    std::vector<c10::IValue> v1(items.begin(), items.end() - 1);
    v1[0] = c10::IValue(int64_t{1});
    const c10::IValue legacy = tuple_of(v1);
    const auto old = ConvolutionContext::from_saved(legacy);
    EXPECT_TRUE(old->recorded_kernels().empty());
    EXPECT_EQ(old->describe(), ctx->describe());
    const at::Tensor x = at::randn({2, 4, 9, 11});
    EXPECT_TRUE(old->run(x, c10::nullopt).equal(back->run(x, c10::nullopt)));

    const auto expect_error = [](const c10::IValue &state, const std::string &needle) {
        const std::string msg = testing::error_of([&] { ConvolutionContext::from_saved(state); });
        EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "', got: " << msg;
    };
    expect_error(c10::IValue(int64_t{2}), "not a tuple starting with its version");
    expect_error(tuple_of({}), "not a tuple starting with its version");
    expect_error(tuple_of({c10::IValue("2")}), "not a tuple starting with its version");
    expect_error(tuple_of({c10::IValue(int64_t{7})}), "version 7 is not supported (expected 1 or 2)");
    expect_error(tuple_of(std::vector<c10::IValue>(items.begin(), items.end() - 1)), "version 2 has 14 items, expected 15");
    auto v1_long = items;
    v1_long[0] = c10::IValue(int64_t{1});
    expect_error(tuple_of(v1_long), "version 1 has 15 items, expected 14");
    auto wrong_type = items;
    wrong_type[9] = c10::IValue(int64_t{3});  // the dtype is a string
    EXPECT_THROW(ConvolutionContext::from_saved(tuple_of(wrong_type)), c10::Error);
    auto wrong_choices = items;
    wrong_choices[14] = c10::IValue(std::vector<int64_t>{1, 2});  // a list of ints, not of lists
    EXPECT_THROW(ConvolutionContext::from_saved(tuple_of(wrong_choices)), c10::Error);
}

TEST_F(OpsSerialization, MalformedLinearStatesThrow) {
    const auto good = LinearContext(at::randn({6, 4}), at::randn({6}), "fp32", {{"relu"}}, 0).state();
    const auto expect_error = [](const LinearContext::State &state, const std::string &needle) {
        const std::string msg = testing::error_of([&] { LinearContext::from_state(state); });
        EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "', got: " << msg;
    };
    expect_error(with<0>(good, int64_t{0}), "version 0 is not supported");
    expect_error(with<4>(good, std::vector<std::string>{"gelu"}), "unknown post-op 'gelu'");
    expect_error(with<5>(good, std::vector<double>{}), "post-op parameters do not match");
    expect_error(with<1>(good, at::randn({6, 4, 1})), "2-D");
    expect_error(with<2>(good, std::vector<at::Tensor>{at::randn({4})}), "does not match 6 output features");
    expect_error(with<3>(good, std::string("fp8")), "unknown compute dtype");
    expect_error(with<6>(good, int64_t{-1}), "rows hint");
}

// A TorchScript module holding a context as an attribute, saved and loaded.
torch::jit::Module module_with(const c10::IValue &ctx, const c10::TypePtr &type, const std::string &forward) {
    torch::jit::Module m("Holder");
    m.register_attribute("ctx", type, ctx);
    testing::define(m, forward);
    return m;
}

torch::jit::Module save_and_load(const torch::jit::Module &m) {
    std::stringstream buffer;
    m.save(buffer);
    buffer.seekg(0);
    return torch::jit::load(buffer);
}

TEST_F(OpsSerialization, ConvModuleSavesAndLoads) {
    const auto ctx = make_conv("fp32", {{"gelu_erf"}});
    const auto type = c10::getCustomClassType<ConvPtr>();
    auto m = module_with(c10::IValue(ctx), type,
                         "def forward(self, x):\n    return torch.ops.ipex.convolution(x, self.ctx)\n");
    auto loaded = save_and_load(m);
    const auto loaded_ctx = loaded.attr("ctx").toCustomClass<ConvolutionContext>();
    EXPECT_NE(loaded_ctx.get(), ctx.get());
    EXPECT_EQ(loaded_ctx->describe(), ctx->describe());
    for (int64_t batch : {1, 3}) {
        const at::Tensor x = at::randn({batch, 4, 9, 11});
        const at::Tensor want = ctx->run(x, c10::nullopt);
        EXPECT_TRUE(m.forward({x}).toTensor().equal(want));
        EXPECT_TRUE(loaded.forward({x}).toTensor().equal(want)) << "batch " << batch;
    }
    // Saved twice in a row: the loaded module pickles again.
    auto again = save_and_load(loaded);
    const at::Tensor x = at::randn({2, 4, 9, 11});
    EXPECT_TRUE(again.forward({x}).toTensor().equal(ctx->run(x, c10::nullopt)));
}

TEST_F(OpsSerialization, ConvSumAndLinearModulesSaveAndLoad) {
    const auto conv = make_conv(lowp_dtype(), {{"sum", 0.5}, {"relu"}});
    const auto linear = c10::make_intrusive<LinearContext>(at::randn({5, 12}), at::randn({5}), "fp32",
                                                           PostOps{{"mul"}}, 0);
    torch::jit::Module m("Holder2");
    m.register_attribute("conv", c10::getCustomClassType<ConvPtr>(), c10::IValue(conv));
    m.register_attribute("lin", c10::getCustomClassType<LinearPtr>(), c10::IValue(linear));
    testing::define(m,
        "def forward(self, x, r, y, g):\n"
        "    return torch.ops.ipex.convolution_sum(x, r, self.conv), torch.ops.ipex.linear_binary(y, g, self.lin)\n");
    auto loaded = save_and_load(m);
    const at::Tensor x = at::randn({2, 4, 9, 11}), r = at::randn({2, 8, 5, 7});
    const at::Tensor y = at::randn({3, 12}), g = at::randn({3, 5});
    const auto got = loaded.forward({x, r, y, g}).toTuple();
    EXPECT_TRUE(got->elements()[0].toTensor().equal(conv->run(x, r)));
    EXPECT_TRUE(got->elements()[1].toTensor().equal(linear->run(y, g)));
}

// Contexts built in TorchScript through the prepack ops, then run.
TEST_F(OpsSerialization, PrepackOpsInScript) {
    const at::Tensor w = at::randn({6, 3, 3, 3}) * 0.3, b = at::randn({6});
    const at::Tensor lw = at::randn({4, 6}) * 0.3;
    torch::jit::Module m("Prepacking");
    m.register_parameter("w", w, false);
    m.register_parameter("b", b, false);
    m.register_parameter("lw", lw, false);
    testing::define(m,
        "def forward(self, x):\n"
        "    c = torch.ops.ipex.convolution_prepack(self.w, self.b, [1, 1], [1, 1], [1, 1], [0, 0], 1, False,\n"
        "        'fp32', ['leaky_relu'], [0.2, 0.0], [1, 3, 8, 8])\n"
        "    l = torch.ops.ipex.linear_prepack(self.lw, None, 'fp32', ['tanh'], [0.0, 0.0], 0)\n"
        "    y = torch.ops.ipex.convolution(x, c)\n"
        "    return torch.ops.ipex.linear(y.permute(0, 2, 3, 1), l)\n");
    const at::Tensor x = at::randn({2, 3, 8, 8});
    const at::Tensor want = at::tanh(testing::reference_linear(
        at::leaky_relu(testing::reference_conv(x, w, b, ConvParams{{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1, false}), 0.2)
            .permute({0, 2, 3, 1}),
        lw, at::Tensor()));
    testing::expect_close(m.forward({x}).toTensor(), want, "fp32", "scripted prepack");
    auto loaded = save_and_load(m);
    testing::expect_close(loaded.forward({x}).toTensor(), want, "fp32", "scripted prepack, loaded");

    // A sum context through ipex::convolution is refused with a hint.
    testing::define(m,
        "def bad(self, x):\n"
        "    c = torch.ops.ipex.convolution_prepack(self.w, None, [1, 1], [1, 1], [1, 1], [0, 0], 1, False,\n"
        "        'fp32', ['sum'], [1.0, 0.0], [])\n"
        "    return torch.ops.ipex.convolution(x, c)\n");
    const std::string msg = testing::any_error_of([&] { m.run_method("bad", x); });
    EXPECT_NE(msg.find("call ipex::convolution_sum"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ipex::ops
