#include <gtest/gtest.h>

#include "base/errors.h"
#include "pass_test_utils.h"
#include "passes/cast_to_lowp.h"
#include "ir/graph_utils.h"
#include "passes/lowp_op_tables.h"

namespace ipex::passes {
namespace {

using testing::ConvSpec;

torch::jit::Module layer_norm_module(int64_t channels) {
    return testing::make_module(
        "LayerNorm",
        "def forward(self, x):\n    return torch.layer_norm(x, [" + std::to_string(channels) +
            "], self.weight, self.bias, 1e-5, False)\n",
        {{"weight", at::rand({channels}) + 0.5}, {"bias", at::randn({channels}) * 0.1}});
}

// dtype of the constant feeding input `name` of the first node of `kind`.
c10::optional<at::ScalarType> constant_dtype(const std::shared_ptr<torch::jit::Graph> &graph, const std::string &kind,
                                             const char *name) {
    for (torch::jit::Node *node : collect_nodes(graph->block())) {
        if (node->kind().toQualString() != kind) continue;
        if (auto t = constant_tensor(input_named(node, name))) return t->scalar_type();
        return c10::nullopt;
    }
    return c10::nullopt;
}

// Runs original and converted graphs; every floating output must be fp32 and close.
void expect_close(const testing::Frozen &frozen, const std::shared_ptr<torch::jit::Graph> &original,
                  const std::vector<c10::IValue> &inputs) {
    const auto want = testing::run_graph(original, frozen.module, inputs);
    const auto got = testing::run_graph(frozen.graph, frozen.module, inputs);
    const auto got_tensors = testing::flatten_tensors(got);
    const auto want_tensors = testing::flatten_tensors(want);
    ASSERT_EQ(got_tensors.size(), want_tensors.size());
    for (size_t i = 0; i < got_tensors.size(); ++i) {
        EXPECT_EQ(got_tensors[i].scalar_type(), want_tensors[i].scalar_type()) << "output " << i;
        if (!want_tensors[i].is_floating_point()) {
            EXPECT_TRUE(got_tensors[i].equal(want_tensors[i])) << "integer output " << i;
        }
    }
    EXPECT_GE(testing::cosine_similarity(got, want), testing::kLowpMinCosine);
}

// Unconditional casts of `value` (casts inside a run-time dtype guard not counted).
int direct_casts_of(const torch::jit::Value *value) {
    int n = 0;
    for (const auto &use : value->uses())
        n += use.user->kind() == c10::aten::to && use.user->owningBlock() == value->owningGraph()->block();
    return n;
}

class CastToLowp : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(CastToLowp, SmallConvNet) {
    auto model = testing::make_module(
        "ConvNet",
        "def forward(self, x):\n"
        "    y = torch.relu(self.bn.forward(self.conv1.forward(x)))\n"
        "    y = torch.max_pool2d(y, [2, 2], [2, 2], [0, 0], [1, 1], False)\n"
        "    y = torch.relu(self.conv2.forward(y))\n"
        "    y = torch.adaptive_avg_pool2d(y, [1, 1]).flatten(1)\n"
        "    return self.fc.forward(y)\n",
        {},
        {{"conv1", testing::conv_module({"conv2d", 3, 8, 3, 1, 1, 1, true})},
         {"bn", testing::batch_norm_module(8)},
         {"conv2", testing::conv_module({"conv2d", 8, 16, 3, 1, 1, 1, false})},
         {"fc", testing::linear_module(16, 10)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    const PassResult r = cast_to_lowp(frozen.graph, at::kBFloat16, false);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.count, 3);
    EXPECT_EQ(r.modules, (std::vector<std::string>{"conv1", "conv2", "fc"}));
    EXPECT_EQ(constant_dtype(frozen.graph, "aten::conv2d", "weight"), at::kBFloat16);
    EXPECT_EQ(constant_dtype(frozen.graph, "aten::conv2d", "bias"), at::kBFloat16);
    EXPECT_EQ(constant_dtype(frozen.graph, "aten::linear", "weight"), at::kBFloat16);
    // batch_norm keeps fp32 parameters; it takes conv1's bf16 output as it is where libtorch
    // has the mixed kernel, else an fp32 cast of it.
    EXPECT_EQ(constant_dtype(frozen.graph, "aten::batch_norm", "running_mean"), at::kFloat);
    EXPECT_EQ(direct_casts_of(frozen.graph->inputs()[1]), 1);
    for (const torch::jit::Node *node : frozen.graph->nodes()) {
        if (node->kind() != c10::aten::batch_norm) continue;
        const bool cast_in = node->input(0)->node()->kind() == c10::aten::to;
        EXPECT_EQ(cast_in, !lowp_batch_norm_mixed_ok(at::kBFloat16)) << *frozen.graph;
    }
    EXPECT_EQ(testing::count(frozen.graph, "prim::If"), 0);  // every cast decided statically
    expect_close(frozen, original, {at::randn({2, 3, 16, 16})});
}

TEST_F(CastToLowp, TinyTransformerBlockWithIntegerMask) {
    constexpr int64_t kC = 16;
    auto model = testing::make_module(
        "Block",
        "def forward(self, x, mask):\n"
        "    h = self.ln1.forward(x)\n"
        "    q = self.q.forward(h)\n"
        "    k = self.k.forward(h)\n"
        "    v = self.v.forward(h)\n"
        "    scores = torch.matmul(q, k.transpose(-1, -2)) / 4.0\n"
        "    scores = scores.masked_fill((mask == 0).unsqueeze(1), -10000.0)\n"
        "    ctx = torch.matmul(torch.softmax(scores, -1), v)\n"
        "    x = x + self.o.forward(ctx)\n"
        "    y = x + self.fc2.forward(torch.gelu(self.fc1.forward(self.ln2.forward(x))))\n"
        "    lengths = mask.sum(-1)\n"
        "    positions = torch.cumsum(mask, 1) * mask\n"
        "    return y, lengths, positions\n",
        {},
        {{"ln1", layer_norm_module(kC)}, {"q", testing::linear_module(kC, kC)}, {"k", testing::linear_module(kC, kC)},
         {"v", testing::linear_module(kC, kC)}, {"o", testing::linear_module(kC, kC)}, {"ln2", layer_norm_module(kC)},
         {"fc1", testing::linear_module(kC, 4 * kC)}, {"fc2", testing::linear_module(4 * kC, kC)}});
    const at::Tensor x = at::randn({2, 5, kC});
    at::Tensor mask = at::ones({2, 5}, at::kLong);
    mask.index_put_({1, at::indexing::Slice(3, at::indexing::None)}, 0);

    for (bool typed_inputs : {false, true}) {
        auto frozen = testing::freeze(model);
        if (typed_inputs) {  // as after --sample-input specialization
            frozen.graph->inputs()[1]->setType(c10::TensorType::create(x));
            frozen.graph->inputs()[2]->setType(c10::TensorType::create(mask));
        }
        auto original = frozen.graph->copy();
        const PassResult r = cast_to_lowp(frozen.graph, at::kBFloat16, false);
        EXPECT_EQ(r.count, 9);  // 6 linears + 2 matmuls + the softmax between them
        EXPECT_EQ(direct_casts_of(frozen.graph->inputs()[2]), 0) << "the int mask is never cast";
        if (typed_inputs) {
            EXPECT_EQ(testing::count(frozen.graph, "prim::If"), 0);
        }
        expect_close(frozen, original, {x, mask});
        const auto out = testing::run_graph(frozen.graph, frozen.module, {x, mask}).toTupleRef().elements();
        EXPECT_EQ(out[0].toTensor().scalar_type(), at::kFloat);
        EXPECT_EQ(out[1].toTensor().scalar_type(), at::kLong);
    }
}

TEST_F(CastToLowp, KeepDtypeOutputsReturnsLowPrecision) {
    auto frozen = testing::freeze(testing::linear_module(4, 3));
    const PassResult r = cast_to_lowp(frozen.graph, at::kBFloat16, /*keep_dtype_outputs=*/true);
    EXPECT_TRUE(r.changed);
    const auto out = testing::run_graph(frozen.graph, frozen.module, {at::randn({2, 4})});
    EXPECT_EQ(out.toTensor().scalar_type(), at::kBFloat16);
}

TEST_F(CastToLowp, OutputsInsideContainersGoBackToFp32) {
    auto model = testing::make_module(
        "Containers",
        "def forward(self, x) -> Tuple[Tuple[Tensor, List[Tensor]], Dict[str, Tensor], List[Tensor], Tensor]:\n"
        "    y = self.fc.forward(x)\n"
        "    parts = torch.split(y, 2, -1)\n"
        "    return (y, [y, y + 1.0]), {'a': y, 'n': y.argmax(-1)}, parts, y.argmax(-1)\n",
        {}, {{"fc", testing::linear_module(4, 6)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    cast_to_lowp(frozen.graph, at::kBFloat16, false);
    expect_close(frozen, original, {at::randn({3, 4})});
}

TEST_F(CastToLowp, EntryCastSharedByConsumers) {
    auto model = testing::make_module(
        "TwoHeads",
        "def forward(self, x):\n    return self.a.forward(x) + self.b.forward(x * 2.0), self.a.forward(x)\n", {},
        {{"a", testing::linear_module(4, 4)}, {"b", testing::linear_module(4, 4)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    cast_to_lowp(frozen.graph, at::kBFloat16, false);
    EXPECT_EQ(direct_casts_of(frozen.graph->inputs()[1]), 1);
    expect_close(frozen, original, {at::randn({2, 4})});
}

TEST_F(CastToLowp, ConvTransposeWithoutLowpKernelStaysFp32) {
    if (lowp_conv_transpose_ok(at::kBFloat16)) GTEST_SKIP() << "this libtorch has a bf16 conv_transpose";
    auto model = testing::make_module(
        "Decoder", "def forward(self, x):\n    return self.conv.forward(torch.relu(self.up.forward(x)))\n", {},
        {{"up", testing::conv_module({"conv_transpose2d", 8, 4, 2, 1, 2, 0, true})},
         {"conv", testing::conv_module({"conv2d", 4, 4, 3, 1, 1, 1, true})}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    const PassResult r = cast_to_lowp(frozen.graph, at::kBFloat16, false);
    EXPECT_EQ(r.count, 1);
    EXPECT_EQ(constant_dtype(frozen.graph, "aten::conv_transpose2d", "weight"), at::kFloat);
    EXPECT_EQ(constant_dtype(frozen.graph, "aten::conv2d", "weight"), at::kBFloat16);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped.front().find("conv_transpose2d"), std::string::npos) << r.skipped.front();
    expect_close(frozen, original, {at::randn({1, 8, 6, 6})});
}

TEST_F(CastToLowp, EmbeddingsWithIntegerIndices) {
    auto model = testing::make_module(
        "Embed",
        "def forward(self, ids, offsets):\n"
        "    e = torch.embedding(self.table, ids, -1, False, False)\n"
        "    bag = torch.embedding_bag(self.table, ids.flatten(), offsets, False, 0, False, None, False)[0]\n"
        "    return self.fc.forward(e).mean(1) + bag.sum()\n",
        {{"table", at::randn({20, 8})}}, {{"fc", testing::linear_module(8, 8)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    cast_to_lowp(frozen.graph, at::kBFloat16, false);
    EXPECT_EQ(constant_dtype(frozen.graph, "aten::embedding", "weight"), at::kBFloat16);
    const at::ScalarType bag_dtype = lowp_embedding_bag_ok(at::kBFloat16) ? at::kBFloat16 : at::kFloat;
    EXPECT_EQ(constant_dtype(frozen.graph, "aten::embedding_bag", "weight"), bag_dtype);
    const at::Tensor ids = at::randint(0, 20, {3, 5}, at::kLong);
    expect_close(frozen, original, {ids, at::arange(0, 15, 5, at::kLong)});
}

// The first softmax node (or null).
const torch::jit::Node *first_softmax(const std::shared_ptr<torch::jit::Graph> &graph) {
    for (torch::jit::Node *node : collect_nodes(graph->block()))
        if (node->kind() == c10::aten::softmax) return node;
    return nullptr;
}

// Whether a softmax reads and writes bf16 itself: no cast (plain or guarded) feeds it and none reads it.
bool runs_without_casts(const torch::jit::Node *softmax) {
    const auto producer = softmax->input(0)->node()->kind();
    if (producer == c10::aten::to || producer == c10::prim::If) return false;
    for (const auto &use : softmax->output()->uses())
        if (use.user->kind() == c10::aten::to) return false;
    return true;
}

// What narrowing relies on: this libtorch's bf16 CPU softmax equals the fp32 softmax of the
// same values rounded once to bf16 (last and other dims, vectorized and tail sizes), within
// one bf16 rounding step.
TEST_F(CastToLowp, Bf16SoftmaxIsFp32SoftmaxRounded) {
    const std::vector<std::pair<std::vector<int64_t>, int64_t>> cases = {
        {{4, 3, 32, 32}, -1}, {{4, 3, 32, 32}, 1}, {{2, 1000}, -1}, {{5, 37, 3}, 1}, {{7}, 0}, {{3, 17}, 0}};
    for (const auto &[shape, dim] : cases) {
        const at::Tensor x = (at::randn(shape) * 4).to(at::kBFloat16);
        const at::Tensor want = at::softmax(x.to(at::kFloat), dim).to(at::kBFloat16).to(at::kFloat);
        const at::Tensor got = at::softmax(x, dim);
        ASSERT_EQ(got.scalar_type(), at::kBFloat16);
        const double step = (want.abs() * (1.0 / 128)).max().item<double>();  // one bf16 ulp at the largest value
        EXPECT_LE((got.to(at::kFloat) - want).abs().max().item<double>(), step) << at::IntArrayRef(shape) << " dim " << dim;
    }
}

// A softmax whose input is surely bf16 and whose only reader casts back to bf16 runs in bf16;
// one whose result is also returned, or whose input may be fp32, stays fp32.
TEST_F(CastToLowp, SoftmaxBetweenBf16OpsRunsInBf16) {
    const std::vector<std::pair<std::string, bool>> cases = {
        {"    return torch.matmul(torch.softmax(s / 4.0, -1), v)\n", true},
        {"    p = torch.softmax(s, -1)\n    return torch.matmul(p, v), p\n", false},  // also returned
        {"    return torch.softmax(s, -1)\n", false},                                    // returned
        {"    return torch.matmul(torch.softmax(x, -1), v)\n", false},                   // input may be fp32
        {"    return torch.matmul(torch.softmax(s, -1, 6), v)\n", false},                // the user's fp32
    };
    for (const auto &[tail, narrowed] : cases) {
        auto model = testing::make_module("Attention",
                                          "def forward(self, x):\n"
                                          "    s = self.q.forward(x)\n"
                                          "    v = x + 1.0\n" + tail,
                                          {}, {{"q", testing::linear_module(8, 8)}});
        auto frozen = testing::freeze(model);
        auto original = frozen.graph->copy();
        const PassResult r = cast_to_lowp(frozen.graph, at::kBFloat16, false);
        if (narrowed) EXPECT_EQ(r.count, 3) << "linear, softmax, matmul";
        const torch::jit::Node *softmax = first_softmax(frozen.graph);
        ASSERT_NE(softmax, nullptr) << tail;
        EXPECT_EQ(runs_without_casts(softmax), narrowed) << tail << *frozen.graph;
        expect_close(frozen, original, {at::randn({3, 8, 8})});
    }
}

TEST_F(CastToLowp, UserConversionsKeepWorking) {
    auto model = testing::make_module(
        "Conversions",
        "def forward(self, x):\n"
        "    y = self.fc.forward(x)\n"
        "    z = y.double() * 2.0\n"
        "    w = torch.softmax(y, -1, 6)\n"
        "    m = (y > 0).to(y.dtype) * y\n"
        "    return z, w, y.type_as(x) + m, x.float() + 1.0\n",
        {}, {{"fc", testing::linear_module(4, 4)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    cast_to_lowp(frozen.graph, at::kBFloat16, false);
    const at::Tensor x = at::randn({3, 4});
    expect_close(frozen, original, {x});
    const auto out = testing::run_graph(frozen.graph, frozen.module, {x}).toTupleRef().elements();
    EXPECT_EQ(out[0].toTensor().scalar_type(), at::kDouble);  // the user's fp64 stays fp64
}

TEST_F(CastToLowp, ControlFlowAndLoops) {
    auto model = testing::make_module(
        "Rnn",
        "def forward(self, x, n: int, flag: bool):\n"
        "    h = x * 0.5\n"
        "    for i in range(n):\n"
        "        h = torch.tanh(self.ih.forward(x) + self.hh.forward(h))\n"
        "    if flag:\n"
        "        h = torch.layer_norm(h, [8], None, None, 1e-5, False)\n"
        "    else:\n"
        "        h = self.ih.forward(h)\n"
        "    return h\n",
        {}, {{"ih", testing::linear_module(8, 8)}, {"hh", testing::linear_module(8, 8)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    cast_to_lowp(frozen.graph, at::kBFloat16, false);
    const at::Tensor x = at::randn({2, 8});
    for (int64_t n : {0, 3})
        for (bool flag : {false, true}) expect_close(frozen, original, {x, n, flag});
}

TEST_F(CastToLowp, ResidualInPlaceAddAndUnknownOps) {
    auto model = testing::make_module(
        "Residual",
        "def forward(self, x):\n"
        "    out = self.bn.forward(self.conv.forward(x))\n"
        "    out += x\n"
        "    out = torch.relu_(out)\n"
        "    y = self.conv.forward(out)\n"
        "    y = torch.lerp(y, self.target, 0.25)\n"
        "    y = torch.max_pool3d(y.unsqueeze(0), [1, 2, 2], [1, 2, 2], [0, 0, 0], [1, 1, 1], False).squeeze(0)\n"
        "    return y\n",
        {{"target", at::randn({1, 8, 8, 8})}},
        {{"conv", testing::conv_module({"conv2d", 8, 8, 3, 1, 1, 1, true})}, {"bn", testing::batch_norm_module(8)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    const PassResult r = cast_to_lowp(frozen.graph, at::kBFloat16, false);
    bool noted_lerp = false;
    for (const auto &s : r.skipped) noted_lerp |= s.find("aten::lerp") != std::string::npos;
    EXPECT_TRUE(noted_lerp);
    expect_close(frozen, original, {at::randn({1, 8, 8, 8})});
}

// Values passed through branches as tuples, lists built with append, and Uninitialized
// placeholders keep known dtypes: no run-time dtype guard is needed.
TEST_F(CastToLowp, TracksDtypesThroughBranchesAndContainers) {
    auto model = testing::make_module(
        "Branches",
        "def forward(self, x, flag: bool):\n"
        "    if flag:\n"
        "        pair = (self.a.forward(x), self.b.forward(x))\n"
        "    else:\n"
        "        pair = (self.b.forward(x), self.a.forward(x))\n"
        "    parts: List[Tensor] = []\n"
        "    parts.append(pair[0])\n"
        "    parts.append(pair[1])\n"
        "    p, q = parts\n"
        "    return torch.layer_norm(p + q, [8], None, None, 1e-5, False)\n",
        {}, {{"a", testing::linear_module(8, 8)}, {"b", testing::linear_module(8, 8)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    cast_to_lowp(frozen.graph, at::kBFloat16, false);
    EXPECT_EQ(testing::count(frozen.graph, "prim::dtype"), 0);
    const at::Tensor x = at::randn({3, 8});
    for (bool flag : {false, true}) expect_close(frozen, original, {x, flag});
}

TEST_F(CastToLowp, InPlaceOpsMatchTheirDestination) {
    auto model = testing::make_module(
        "Scatter",
        "def forward(self, x, idx):\n"
        "    out = torch.zeros([4, 8])\n"
        "    out.index_put_([idx], self.a.forward(x))\n"
        "    y = self.b.forward(x)\n"
        "    y.index_put_([idx], out[idx] * 2.0)\n"
        "    return out, y\n",
        {}, {{"a", testing::linear_module(8, 8)}, {"b", testing::linear_module(8, 8)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    cast_to_lowp(frozen.graph, at::kBFloat16, false);
    expect_close(frozen, original, {at::randn({2, 8}), at::arange(2, at::kLong)});
}

TEST_F(CastToLowp, LstmAfterLinearRunsInFp32) {
    constexpr int64_t kH = 6;
    auto model = testing::make_module(
        "Lstm",
        "def forward(self, x, h0, c0):\n"
        "    y = self.proj.forward(x)\n"
        "    out, h, c = torch.lstm(y, [h0, c0], [self.w_ih, self.w_hh, self.b_ih, self.b_hh], True, 1, 0.0, False, False, False)\n"
        "    return out, h, c\n",
        {{"w_ih", at::randn({4 * kH, kH}) * 0.3}, {"w_hh", at::randn({4 * kH, kH}) * 0.3},
         {"b_ih", at::randn({4 * kH})}, {"b_hh", at::randn({4 * kH})}},
        {{"proj", testing::linear_module(kH, kH)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    cast_to_lowp(frozen.graph, at::kBFloat16, false);
    expect_close(frozen, original, {at::randn({5, 2, kH}), at::zeros({1, 2, kH}), at::zeros({1, 2, kH})});
}

TEST_F(CastToLowp, Conv3dNet) {
    auto model = testing::make_module(
        "Video",
        "def forward(self, x):\n"
        "    y = torch.relu(self.bn.forward(self.conv.forward(x)))\n"
        "    y = torch.avg_pool3d(y, [2, 2, 2], [2, 2, 2], [0, 0, 0], False, True, None)\n"
        "    return y.mean([2, 3, 4])\n",
        {}, {{"conv", testing::conv_module({"conv3d", 3, 6, 3, 1, 1, 1, true})}, {"bn", testing::batch_norm_module(6)}});
    auto frozen = testing::freeze(model);
    auto original = frozen.graph->copy();
    EXPECT_EQ(cast_to_lowp(frozen.graph, at::kBFloat16, false).count, 1);
    expect_close(frozen, original, {at::randn({1, 3, 6, 8, 8})});
}

TEST_F(CastToLowp, NoOpWithoutLowPrecisionOps) {
    auto frozen = testing::freeze(testing::make_module("Plain", "def forward(self, x):\n    return torch.softmax(x * 2.0, -1)\n"));
    const std::string before = frozen.graph->toString();
    const PassResult r = cast_to_lowp(frozen.graph, at::kBFloat16, false);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(frozen.graph->toString(), before);
}

TEST_F(CastToLowp, Fp16WithoutCpuKernelsIsUnsupported) {
    std::string why;
    if (lowp_dtype_runnable(at::kHalf, &why)) GTEST_SKIP() << "this libtorch runs fp16 on the CPU";
    auto frozen = testing::freeze(testing::linear_module(4, 3));
    const std::string before = frozen.graph->toString();
    try {
        cast_to_lowp(frozen.graph, at::kHalf, false);
        FAIL() << "expected an unsupported error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::unsupported);
        EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
    }
    EXPECT_EQ(frozen.graph->toString(), before);
}

}  // namespace
}  // namespace ipex::passes
