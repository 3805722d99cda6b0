// One context (and one loaded TorchScript module) called from several threads at once, each
// with inputs of its own batch size: every result equals the single-threaded one.
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/custom_class.h>

#include <atomic>
#include <functional>
#include <sstream>
#include <thread>

#include "ops/ops.h"
#include "unit/ops/ops_test_utils.h"
#include "unit/test_cpu.h"

namespace ipex::ops {
namespace {

constexpr int kThreads = 4;
constexpr int kIterations = 20;

using ConvPtr = c10::intrusive_ptr<ConvolutionContext>;
using LinearPtr = c10::intrusive_ptr<LinearContext>;

struct Work {
    std::vector<c10::IValue> inputs;  // per thread
    // The single-threaded result; undefined: the shared callee's own, run alone after the race
    // (a convolution context times its own kernel against oneDNN on a shape's first call, so two
    // contexts may take different kernels for one shape, whose results differ by rounding).
    at::Tensor want;
};

// Runs `call(inputs)` from kThreads threads at once, kIterations times each; counts results that
// differ from `want` (exactly, or beyond `tolerance` relative).
int mismatches(const std::vector<Work> &work, const std::function<at::Tensor(const std::vector<c10::IValue> &)> &call,
               double tolerance) {
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kThreads);
    std::vector<std::vector<at::Tensor>> results(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            ++ready;
            while (ready.load() < kThreads) std::this_thread::yield();  // start together
            try {
                for (int i = 0; i < kIterations; ++i) results[t].push_back(call(work[t].inputs));
            } catch (const std::exception &e) {
                errors[t] = e.what();
            }
        });
    }
    for (auto &thread : threads) thread.join();
    int bad = 0;
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
        bad += kIterations - static_cast<int>(results[t].size());
        const at::Tensor want = work[t].want.defined() ? work[t].want : call(work[t].inputs);
        for (const at::Tensor &got : results[t]) {
            const bool same =
                tolerance == 0.0 ? got.equal(want) : testing::max_relative_error(got, want) <= tolerance;
            if (!same) ++bad;
        }
    }
    return bad;
}

class OpsThreadSafety : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(6); }
};

// The shared context starts with only its hint shape packed, so the threads also race on
// creating primitives and timing its own kernels against oneDNN; each thread's results must equal
// the context's own run alone afterwards.
TEST_F(OpsThreadSafety, ConvContextFromFourThreads) {
    for (const std::string dtype : {"fp32", "bf16"}) {
        if (!ipex::testing::onednn_runs(dtype)) continue;
        const auto shared = c10::make_intrusive<ConvolutionContext>(
            at::randn({16, 8, 3, 3}) * 0.3, at::randn({16}), ConvParams{{1, 1}, {1, 1}, {1, 1}, {}, 1, false}, dtype,
            PostOps{{"relu"}}, false, std::vector<int64_t>{});
        std::vector<Work> work(kThreads);
        for (int t = 0; t < kThreads; ++t) work[t] = {{at::randn({t + 1, 8, 13, 15})}, at::Tensor()};
        const int bad = mismatches(
            work, [&](const std::vector<c10::IValue> &in) { return shared->run(in[0].toTensor(), c10::nullopt); }, 0.0);
        EXPECT_EQ(bad, 0) << dtype;
        EXPECT_LE(shared->cached_shapes(), 16u);
    }
}

TEST_F(OpsThreadSafety, ConvSumContextFromFourThreads) {
    const auto shared = c10::make_intrusive<ConvolutionContext>(
        at::randn({8, 8, 3, 3}) * 0.3, at::randn({8}), ConvParams{{2, 2}, {1, 1}, {1, 1}, {}, 1, false}, "fp32",
        PostOps{{"sum", 0.5}, {"gelu_tanh"}}, false, std::vector<int64_t>{});
    std::vector<Work> work(kThreads);
    for (int t = 0; t < kThreads; ++t) work[t] = {{at::randn({t + 1, 8, 11, 9}), at::randn({t + 1, 8, 6, 5})}, {}};
    const int bad = mismatches(
        work,
        [&](const std::vector<c10::IValue> &in) { return shared->run(in[0].toTensor(), in[1].toTensor()); }, 0.0);
    EXPECT_EQ(bad, 0);
}

TEST_F(OpsThreadSafety, LinearContextFromFourThreads) {
    for (const std::string dtype : {"fp32", "bf16"}) {
        if (!ipex::testing::onednn_runs(dtype)) continue;
        const auto shared = c10::make_intrusive<LinearContext>(at::randn({48, 64}) * 0.3, at::randn({48}), dtype,
                                                               PostOps{{"add"}, {"silu"}}, 0);
        const auto reference = LinearContext::from_state(shared->state());
        std::vector<Work> work(kThreads);
        for (int t = 0; t < kThreads; ++t) {
            const at::Tensor x = at::randn({t + 1, 7, 64});
            const at::Tensor other = at::randn({t + 1, 7, 48});
            work[t] = {{x, other}, reference->run(x, other)};
        }
        const int bad = mismatches(
            work,
            [&](const std::vector<c10::IValue> &in) { return shared->run(in[0].toTensor(), in[1].toTensor()); },
            0.0);
        EXPECT_EQ(bad, 0) << dtype;
    }
}

// A TorchScript module (conv then linear) saved, loaded once, and run from four threads.
TEST_F(OpsThreadSafety, LoadedModuleFromFourThreads) {
    const auto conv = c10::make_intrusive<ConvolutionContext>(
        at::randn({12, 3, 3, 3}) * 0.3, at::randn({12}), ConvParams{{1, 1}, {0, 0}, {1, 1}, {}, 1, false}, "fp32",
        PostOps{{"hardswish"}}, false, std::vector<int64_t>{});
    const auto linear =
        c10::make_intrusive<LinearContext>(at::randn({5, 12}) * 0.3, at::randn({5}), "fp32", PostOps{{"tanh"}}, 0);
    torch::jit::Module m("Net");
    m.register_attribute("conv", c10::getCustomClassType<ConvPtr>(), c10::IValue(conv));
    m.register_attribute("lin", c10::getCustomClassType<LinearPtr>(), c10::IValue(linear));
    testing::define(m,
        "def forward(self, x):\n"
        "    y = torch.ops.ipex.convolution(x, self.conv)\n"
        "    return torch.ops.ipex.linear(y.mean([2, 3]), self.lin)\n");
    std::stringstream buffer;
    m.save(buffer);
    buffer.seekg(0);
    torch::jit::Module loaded = torch::jit::load(buffer);

    std::vector<Work> work(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        const at::Tensor x = at::randn({2 * t + 1, 3, 10, 12});
        work[t] = {{x}, m.forward({x}).toTensor()};
        ASSERT_EQ(work[t].want.sizes(), (std::vector<int64_t>{2 * t + 1, 5}));
    }
    const int bad = mismatches(
        work, [&](const std::vector<c10::IValue> &in) { return loaded.forward(in).toTensor(); }, 0.0);
    EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace ipex::ops
