// The prepacked LSTM/GRU context against fp64 aten::lstm / aten::gru over every configuration
// (layers, directions, batch_first, biases, initial states, odd sizes, one step), bf16 by
// cosine, pickling round trips, damaged saved states and the registered ops in TorchScript.
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ops/rnn_context.h"
#include "unit/ops/ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

using RnnPtr = c10::intrusive_ptr<RnnContext>;

constexpr double kFp32MaxRelative = 1e-5;
constexpr double kBf16MinCosine = 0.999;

struct Config {
    std::string mode = "lstm";
    int64_t input_size = 5, hidden_size = 7, layers = 1;
    bool bidirectional = false, batch_first = false, bias = true, states = false;
    int64_t steps = 4, batch = 3;

    RnnParams params() const { return {mode, input_size, hidden_size, layers, bidirectional, batch_first, bias}; }
    std::string name() const {
        std::ostringstream out;
        out << mode << " in" << input_size << " h" << hidden_size << " L" << layers << (bidirectional ? " bi" : "")
            << (batch_first ? " batch_first" : "") << (bias ? "" : " nobias") << (states ? " h0" : "") << " T"
            << steps << " N" << batch;
        return out.str();
    }
};

// aten's flat weights, uniform in +-1/sqrt(H) as nn.LSTM/nn.GRU initialise them.
std::vector<at::Tensor> make_weights(const Config &c) {
    const int64_t gates = c.mode == "lstm" ? 4 : 3, dirs = c.bidirectional ? 2 : 1;
    const double bound = 1.0 / std::sqrt(static_cast<double>(c.hidden_size));
    const auto uniform = [&](std::vector<int64_t> sizes) { return (at::rand(sizes) * 2 - 1) * bound; };
    std::vector<at::Tensor> weights;
    for (int64_t l = 0; l < c.layers; ++l) {
        for (int64_t d = 0; d < dirs; ++d) {
            const int64_t in = l == 0 ? c.input_size : c.hidden_size * dirs;
            weights.push_back(uniform({gates * c.hidden_size, in}));
            weights.push_back(uniform({gates * c.hidden_size, c.hidden_size}));
            if (c.bias) {
                weights.push_back(uniform({gates * c.hidden_size}));
                weights.push_back(uniform({gates * c.hidden_size}));
            }
        }
    }
    return weights;
}

struct Inputs {
    at::Tensor x, h0, c0;
};

Inputs make_inputs(const Config &c) {
    const int64_t dirs = c.bidirectional ? 2 : 1;
    Inputs in;
    in.x = c.batch_first ? at::randn({c.batch, c.steps, c.input_size}) : at::randn({c.steps, c.batch, c.input_size});
    if (c.states) {
        in.h0 = at::randn({c.layers * dirs, c.batch, c.hidden_size}) * 0.5;
        in.c0 = at::randn({c.layers * dirs, c.batch, c.hidden_size}) * 0.5;
    }
    return in;
}

// fp64 aten outputs: output, h_n and (LSTM) c_n.
std::vector<at::Tensor> reference(const Config &c, const std::vector<at::Tensor> &weights, const Inputs &in) {
    std::vector<at::Tensor> w64;
    for (const auto &w : weights) w64.push_back(w.to(at::kDouble));
    const int64_t dirs = c.bidirectional ? 2 : 1;
    const auto zeros = at::zeros({c.layers * dirs, c.batch, c.hidden_size}, at::kDouble);
    const at::Tensor h0 = in.h0.defined() ? in.h0.to(at::kDouble) : zeros;
    const at::Tensor x = in.x.to(at::kDouble);
    if (c.mode == "lstm") {
        const at::Tensor c0 = in.c0.defined() ? in.c0.to(at::kDouble) : zeros;
        auto [y, h, cn] = at::lstm(x, {h0, c0}, w64, c.bias, c.layers, 0.0, false, c.bidirectional, c.batch_first);
        return {y, h, cn};
    }
    auto [y, h] = at::gru(x, h0, w64, c.bias, c.layers, 0.0, false, c.bidirectional, c.batch_first);
    return {y, h};
}

std::vector<at::Tensor> run(const RnnContext &ctx, const Inputs &in) {
    auto [y, h, cn] = ctx.run(in.x, in.h0, in.c0);
    if (!ctx.is_lstm()) {
        EXPECT_FALSE(cn.defined());
        return {y, h};
    }
    return {y, h, cn};
}

void expect_matches(const Config &c, const std::string &dtype) {
    const auto weights = make_weights(c);
    const RnnContext ctx(c.params(), weights, dtype);
    const Inputs in = make_inputs(c);
    const auto got = run(ctx, in);
    const auto want = reference(c, weights, in);
    ASSERT_EQ(got.size(), want.size()) << c.name();
    const char *names[] = {"output", "h_n", "c_n"};
    for (size_t i = 0; i < got.size(); ++i) {
        const std::string what = c.name() + " " + dtype + " " + names[i];
        ASSERT_EQ(got[i].sizes(), want[i].sizes()) << what;
        EXPECT_EQ(got[i].scalar_type(), in.x.scalar_type()) << what;
        if (dtype == "fp32") {
            EXPECT_LE(testing::max_relative_error(got[i], want[i]), kFp32MaxRelative) << what;
        } else {
            EXPECT_GE(testing::cosine(got[i], want[i]), kBf16MinCosine) << what;
        }
    }
}

class RnnContextTest : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(11); }
};

TEST_F(RnnContextTest, Fp32MatchesAtenInEveryConfiguration) {
    for (const std::string mode : {"lstm", "gru"})
        for (int64_t layers : {1, 2, 3})
            for (bool bidirectional : {false, true})
                for (bool batch_first : {false, true})
                    for (bool bias : {true, false})
                        for (bool states : {false, true}) {
                            Config c;
                            c.mode = mode;
                            c.layers = layers;
                            c.bidirectional = bidirectional;
                            c.batch_first = batch_first;
                            c.bias = bias;
                            c.states = states;
                            expect_matches(c, "fp32");
                        }
}

TEST_F(RnnContextTest, OddSizesOneStepAndStackedPrimitives) {
    for (const std::string mode : {"lstm", "gru"}) {
        Config odd;
        odd.mode = mode;
        odd.input_size = 13, odd.hidden_size = 17, odd.layers = 2, odd.batch = 5, odd.steps = 1;
        odd.states = true;
        expect_matches(odd, "fp32");
        odd.bidirectional = true;
        odd.batch_first = true;
        expect_matches(odd, "fp32");
        // input_size == hidden_size: the three layers share one primitive.
        Config stacked;
        stacked.mode = mode;
        stacked.input_size = stacked.hidden_size = 9;
        stacked.layers = 3;
        stacked.steps = 6;
        stacked.batch = 1;
        stacked.states = true;
        EXPECT_EQ(RnnContext(stacked.params(), make_weights(stacked), "fp32").segments().size(), 1u);
        expect_matches(stacked, "fp32");
        // Otherwise the first layer runs alone and the rest together.
        stacked.input_size = 4;
        EXPECT_EQ(RnnContext(stacked.params(), make_weights(stacked), "fp32").segments(),
                  (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}}));
        expect_matches(stacked, "fp32");
    }
}

TEST_F(RnnContextTest, Bf16MatchesAtenByCosine) {
    IPEX_SKIP_WITHOUT_ONEDNN_DTYPE("bf16");
    for (const std::string mode : {"lstm", "gru"})
        for (int64_t layers : {1, 2})
            for (bool bidirectional : {false, true})
                for (bool states : {false, true}) {
                    Config c;
                    c.mode = mode;
                    c.input_size = 24, c.hidden_size = 32, c.steps = 10, c.batch = 4;
                    c.layers = layers;
                    c.bidirectional = bidirectional;
                    c.batch_first = states;
                    c.bias = !bidirectional;
                    c.states = states;
                    expect_matches(c, "bf16");
                }
}

TEST_F(RnnContextTest, OutputsKeepTheInputDtypeAndShapesAreCached) {
    Config c;
    c.states = true;
    const RnnContext ctx(c.params(), make_weights(c), "fp32");
    Inputs in = make_inputs(c);
    in.x = in.x.to(at::kBFloat16);
    auto [y, h, cn] = ctx.run(in.x, in.h0, in.c0);
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_EQ(h.scalar_type(), at::kBFloat16);
    EXPECT_EQ(cn.scalar_type(), at::kBFloat16);
    EXPECT_EQ(ctx.cached_shapes(), 1u);
    ctx.run(at::randn({7, 2, c.input_size}), at::Tensor(), at::Tensor());
    ctx.run(at::randn({4, 3, c.input_size}), at::Tensor(), at::Tensor());
    EXPECT_EQ(ctx.cached_shapes(), 2u);
    for (int64_t steps = 1; steps <= 40; ++steps) ctx.run(at::randn({steps, 1, c.input_size}), at::Tensor(), at::Tensor());
    EXPECT_EQ(ctx.cached_shapes(), PrimitiveCache<int>::kMaxShapes);
}

TEST_F(RnnContextTest, ConcurrentCallsShareOneContext) {
    Config c;
    c.mode = "gru";
    c.layers = 2;
    c.bidirectional = true;
    const RnnContext ctx(c.params(), make_weights(c), "fp32");
    constexpr int kThreads = 4;
    std::vector<at::Tensor> inputs, want(kThreads), got(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        inputs.push_back(at::randn({3 + t % 2, 2, c.input_size}));
        want[t] = std::get<0>(ctx.run(inputs[t], at::Tensor(), at::Tensor()));
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20; ++i) got[t] = std::get<0>(ctx.run(inputs[t], at::Tensor(), at::Tensor()));
        });
    for (auto &thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(got[t].equal(want[t])) << "thread " << t;
}

TEST_F(RnnContextTest, BadCallsAreInputErrors) {
    Config c;
    const RnnContext ctx(c.params(), make_weights(c), "fp32");
    EXPECT_NE(testing::error_of([&] { ctx.run(at::randn({4, 3}), at::Tensor(), at::Tensor()); }).find("3-D"),
              std::string::npos);
    EXPECT_NE(testing::error_of([&] { ctx.run(at::randn({4, 3, 6}), at::Tensor(), at::Tensor()); })
                  .find("expected 5 input features"),
              std::string::npos);
    EXPECT_NE(testing::error_of([&] { ctx.run(at::randn({4, 3, 5}), at::randn({1, 2, 7}), at::Tensor()); })
                  .find("h0 of shape [1, 3, 7]"),
              std::string::npos);
    EXPECT_NE(testing::error_of([&] { ctx.run(at::randn({0, 3, 5}), at::Tensor(), at::Tensor()); }).find("empty"),
              std::string::npos);
}

TEST_F(RnnContextTest, StateRoundTrip) {
    for (const std::string mode : {"lstm", "gru"})
        for (const std::string dtype : {"fp32", "bf16"}) {
            if (!ipex::testing::onednn_runs(dtype)) continue;
            Config c;
            c.mode = mode;
            c.layers = 2;
            c.bidirectional = true;
            c.batch_first = true;
            c.bias = mode == "lstm";
            c.states = true;
            const auto ctx = c10::make_intrusive<RnnContext>(c.params(), make_weights(c), dtype);
            const auto back = RnnContext::from_state(ctx->state());
            EXPECT_EQ(back->describe(), ctx->describe());
            const Inputs in = make_inputs(c);
            const auto a = run(*ctx, in), b = run(*back, in);
            for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].equal(b[i])) << c.name() << " " << dtype;
        }
}

template <size_t I, class State, class Value>
State with(State s, Value v) {
    std::get<I>(s) = std::move(v);
    return s;
}

TEST_F(RnnContextTest, DamagedStatesThrow) {
    Config c;
    c.layers = 2;
    const auto good = RnnContext(c.params(), make_weights(c), "fp32").state();
    const auto expect_error = [](const RnnContext::State &state, const std::string &needle) {
        const std::string msg = testing::error_of([&] { RnnContext::from_state(state); });
        EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "', got: " << msg;
    };
    const auto ints = std::get<2>(good);
    const auto with_int = [&](size_t i, int64_t v) {
        auto changed = ints;
        changed[i] = v;
        return with<2>(good, changed);
    };
    auto weights = std::get<3>(good);
    expect_error(with<0>(good, int64_t{2}), "version 2 is not supported");
    expect_error(with<1>(good, std::string("rnn_tanh")), "unknown recurrent mode 'rnn_tanh'");
    expect_error(with<2>(good, std::vector<int64_t>{5, 7}), "2 integer fields");
    expect_error(with_int(0, 6), "weight 0 has shape [28, 5], expected [28, 6]");
    expect_error(with_int(1, 0), "hidden_size is 0");
    expect_error(with_int(1, int64_t{1} << 40), "hidden_size is");
    expect_error(with_int(2, -3), "num_layers is -3");
    expect_error(with_int(2, 3), "8 weight tensors, a 3-layer lstm has 12");
    expect_error(with_int(3, 2), "saved flag 3 is 2");
    expect_error(with_int(5, 0), "8 weight tensors, a 2-layer lstm without biases has 4");
    expect_error(with<3>(good, std::vector<at::Tensor>(weights.begin(), weights.begin() + 3)), "3 weight tensors");
    auto bad = weights;
    bad[5] = at::randn({28, 6});
    expect_error(with<3>(good, bad), "weight 5 has shape [28, 6], expected [28, 7]");
    bad[5] = at::ones({28, 7}, at::kInt);
    expect_error(with<3>(good, bad), "weight 5 must be floating point");
    bad[5] = at::Tensor();
    expect_error(with<3>(good, bad), "weight 5 has shape");
    expect_error(with<4>(good, std::string("fp8")), "unknown compute dtype 'fp8'");
}

torch::jit::Module save_and_load(const torch::jit::Module &m) {
    std::stringstream buffer;
    m.save(buffer);
    buffer.seekg(0);
    return torch::jit::load(buffer);
}

TEST_F(RnnContextTest, OpsRunInTorchScriptAndModulesReload) {
    Config lstm_cfg;
    lstm_cfg.layers = 2;
    lstm_cfg.states = true;
    Config gru_cfg = lstm_cfg;
    gru_cfg.mode = "gru";
    gru_cfg.bidirectional = true;
    const auto lstm_weights = make_weights(lstm_cfg), gru_weights = make_weights(gru_cfg);
    const auto lstm = c10::make_intrusive<RnnContext>(lstm_cfg.params(), lstm_weights, "fp32");
    const auto gru = c10::make_intrusive<RnnContext>(gru_cfg.params(), gru_weights, "fp32");
    torch::jit::Module m("RnnHolder");
    m.register_attribute("lstm", c10::getCustomClassType<RnnPtr>(), c10::IValue(lstm));
    m.register_attribute("gru", c10::getCustomClassType<RnnPtr>(), c10::IValue(gru));
    testing::define(m,
        "def forward(self, x, h, c, g):\n"
        "    y, hn, cn = torch.ops.ipex.lstm(x, [h, c], self.lstm)\n"
        "    z, gn = torch.ops.ipex.gru(x, g, self.gru)\n"
        "    w, wn, wc = torch.ops.ipex.lstm(x, [], self.lstm)\n"
        "    return y, hn, cn, z, gn, w, torch.ops.ipex.gru(x, None, self.gru)[0]\n");
    const Inputs li = make_inputs(lstm_cfg), gi = make_inputs(gru_cfg);
    const auto want_lstm = reference(lstm_cfg, lstm_weights, li);
    const auto want_gru = reference(gru_cfg, gru_weights, Inputs{li.x, gi.h0, {}});
    const auto want_zero_lstm = reference(lstm_cfg, lstm_weights, Inputs{li.x, {}, {}});
    const auto want_zero_gru = reference(gru_cfg, gru_weights, Inputs{li.x, {}, {}});
    auto loaded = save_and_load(m);
    for (auto *module : {&m, &loaded}) {
        const auto out = module->forward({li.x, li.h0, li.c0, gi.h0}).toTuple()->elements();
        const at::Tensor want[] = {want_lstm[0], want_lstm[1], want_lstm[2], want_gru[0], want_gru[1],
                                   want_zero_lstm[0], want_zero_gru[0]};
        for (size_t i = 0; i < 7; ++i)
            EXPECT_LE(testing::max_relative_error(out[i].toTensor(), want[i]), kFp32MaxRelative) << "output " << i;
    }
    // A context of the other kind is refused with a hint.
    testing::define(m, "def bad(self, x):\n    return torch.ops.ipex.gru(x, None, self.lstm)\n");
    EXPECT_NE(testing::any_error_of([&] { m.run_method("bad", li.x); }).find("call ipex::lstm"), std::string::npos);
    // Contexts built in script through rnn_prepack.
    torch::jit::Module p("RnnPrepack");
    p.register_attribute("w", c10::ListType::ofTensors(), c10::List<at::Tensor>(lstm_weights));
    testing::define(p,
        "def forward(self, x):\n"
        "    ctx = torch.ops.ipex.rnn_prepack('lstm', self.w, 5, 7, 2, True, False, False, 'fp32')\n"
        "    return torch.ops.ipex.lstm(x, [], ctx)[0]\n");
    EXPECT_LE(testing::max_relative_error(p.forward({li.x}).toTensor(), want_zero_lstm[0]), kFp32MaxRelative);
}

}  // namespace
}  // namespace ipex::ops
