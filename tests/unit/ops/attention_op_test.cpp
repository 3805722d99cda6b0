// ipex::attention against a naive fp64 reference written here (scores, mask, bias, causal
// limit, softmax, product, element by element): odd lengths, 1-16 heads, head dims 32-128 and
// odd ones, additive / keep / fill / causal masks, broadcast masks and batch dims, strided
// (transposed) operands, rank 3 and 4, fp32 and bf16; key blocks hidden by a mask whose fill
// still weighs in (the recomputed path); rows with no visible key (NaN, as softmax gives);
// shape errors are input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/attention_kernel.h"
#include "ops/attention_op.h"
#include "ops_test_utils.h"

namespace ipex::ops {
namespace {

using testing::cosine;
using testing::max_relative_error;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Inputs {
    at::Tensor q, k, v;
    c10::optional<at::Tensor> bias, mask;
    bool mask_keeps = false;
    double fill = 0.0, scale = 1.0;
    bool causal = false;
};

// Row by row in fp64 over the broadcast batch, with the op's definition (attention_op.h).
at::Tensor naive(const Inputs &in) {
    const int64_t lq = in.q.size(-2), lk = in.k.size(-2), d = in.q.size(-1), dv = in.v.size(-1);
    std::vector<int64_t> batch = at::infer_size(
        at::infer_size(in.q.sizes().slice(0, in.q.dim() - 2), in.k.sizes().slice(0, in.k.dim() - 2)),
        in.v.sizes().slice(0, in.v.dim() - 2));
    auto full = [&](const at::Tensor &t, int64_t rows, int64_t cols) {
        std::vector<int64_t> sizes = batch;
        sizes.push_back(rows);
        sizes.push_back(cols);
        return t.to(at::kDouble).expand(sizes).reshape({-1, rows, cols}).contiguous();
    };
    const at::Tensor q = full(in.q, lq, d), k = full(in.k, lk, d), v = full(in.v, lk, dv);
    const at::Tensor bias = in.bias ? full(*in.bias, lq, lk) : at::Tensor();
    const at::Tensor mask = in.mask ? full(in.mask->to(at::kDouble), lq, lk) : at::Tensor();
    at::Tensor out = at::zeros({q.size(0), lq, dv}, at::kDouble);
    auto qa = q.accessor<double, 3>(), ka = k.accessor<double, 3>(), va = v.accessor<double, 3>();
    auto oa = out.accessor<double, 3>();
    const at::Tensor none = at::zeros({1, 1, 1}, at::kDouble);
    auto ba = (bias.defined() ? bias : none).accessor<double, 3>();
    auto ma = (mask.defined() ? mask : none).accessor<double, 3>();
    std::vector<double> s(lk);
    for (int64_t b = 0; b < q.size(0); ++b)
        for (int64_t i = 0; i < lq; ++i) {
            double top = kNegInf;
            for (int64_t j = 0; j < lk; ++j) {
                double x = 0;
                for (int64_t e = 0; e < d; ++e) x += qa[b][i][e] * ka[b][j][e];
                x *= in.scale;
                if (mask.defined() && (ma[b][i][j] != 0) != in.mask_keeps) x = in.fill;
                if (bias.defined()) x += ba[b][i][j];
                if (in.causal && j > i + lk - lq) x = kNegInf;
                s[j] = x;
                top = std::max(top, x);
            }
            double sum = 0;
            for (int64_t j = 0; j < lk; ++j) sum += s[j] = std::exp(s[j] - top);  // all -inf: NaN
            for (int64_t c = 0; c < dv; ++c) {
                double acc = 0;
                for (int64_t j = 0; j < lk; ++j) acc += s[j] / sum * va[b][j][c];
                oa[b][i][c] = acc;
            }
        }
    std::vector<int64_t> sizes = batch;
    sizes.push_back(lq);
    sizes.push_back(dv);
    return out.reshape(sizes);
}

at::Tensor run(const Inputs &in) {
    return attention(in.q, in.k, in.v, in.bias, in.mask, in.mask_keeps, in.fill, in.scale, in.causal);
}

void expect_matches(const Inputs &in, const std::string &what) {
    const at::Tensor got = run(in);
    const at::Tensor want = naive(in);
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    EXPECT_EQ(got.scalar_type(), in.q.scalar_type()) << what;
    if (in.q.scalar_type() == at::kFloat) {
        EXPECT_LT(max_relative_error(got, want), 1e-5) << what;
        EXPECT_GT(cosine(got, want), 0.99999) << what;
    } else {
        EXPECT_GT(cosine(got, want), 0.999) << what;
        EXPECT_LT(max_relative_error(got, want), 3e-2) << what;
    }
}

struct Shape {
    int64_t batch, heads, lq, lk, d, dv;
};

class OpsAttention : public ::testing::TestWithParam<at::ScalarType> {
protected:
    void SetUp() override {
        at::manual_seed(5);
        if (!attention_kernel::available(GetParam() == at::kBFloat16))
            GTEST_SKIP() << "this CPU lacks the ISA of the blocked kernel (the op runs aten ops; covered by "
                            "AtenFallbackMatches)";
    }
    at::Tensor randn(at::IntArrayRef sizes) const { return at::randn(sizes).to(GetParam()); }
    Inputs inputs(const Shape &s) const {
        Inputs in;
        in.q = randn({s.batch, s.heads, s.lq, s.d});
        in.k = randn({s.batch, s.heads, s.lk, s.d});
        in.v = randn({s.batch, s.heads, s.lk, s.dv});
        in.scale = 1.0 / std::sqrt(static_cast<double>(s.d));
        return in;
    }
};

const std::vector<Shape> kShapes = {
    {1, 1, 1, 1, 32, 32},   {2, 3, 17, 33, 32, 32},  {1, 8, 64, 64, 64, 64},   {1, 4, 65, 130, 64, 64},
    {2, 2, 100, 300, 80, 48}, {1, 16, 7, 129, 128, 128}, {1, 2, 63, 64, 33, 31}, {1, 1, 257, 257, 96, 96},
};

std::string name(const Shape &s) {
    return std::to_string(s.batch) + "x" + std::to_string(s.heads) + " " + std::to_string(s.lq) + "x" +
           std::to_string(s.lk) + " d" + std::to_string(s.d) + "/" + std::to_string(s.dv);
}

TEST_P(OpsAttention, Unmasked) {
    for (const Shape &s : kShapes) expect_matches(inputs(s), name(s));
}

TEST_P(OpsAttention, Causal) {
    for (const Shape &s : kShapes) {
        Inputs in = inputs(s);
        in.causal = true;
        if (s.lq > s.lk) continue;  // rows with no key: NaN (RowsWithNoVisibleKey)
        expect_matches(in, "causal " + name(s));
    }
}

TEST_P(OpsAttention, AdditiveBias) {
    for (const Shape &s : kShapes) {
        Inputs in = inputs(s);
        in.bias = at::randn({1, s.heads, s.lq, s.lk});  // T5-style position bias, broadcast over batch
        expect_matches(in, "bias " + name(s));
        at::Tensor pad = at::zeros({s.batch, 1, 1, s.lk});  // key padding, -inf past half the keys
        pad.slice(3, s.lk / 2 + 1).fill_(kNegInf);
        in.bias = pad;
        expect_matches(in, "padding bias " + name(s));
        in.bias = pad.to(at::kBFloat16);  // a bias of another floating dtype
        expect_matches(in, "bf16 padding bias " + name(s));
    }
}

TEST_P(OpsAttention, BooleanMasks) {
    for (const Shape &s : kShapes) {
        Inputs in = inputs(s);
        at::Tensor keep = at::rand({s.batch, 1, s.lq, s.lk}) > 0.3;
        keep.select(3, 0).fill_(true);
        in.mask = keep;
        in.mask_keeps = true;  // where(mask, scores, -1e4), GPT-2 style
        in.fill = -1e4;
        expect_matches(in, "keep mask " + name(s));
        at::Tensor hide = at::rand({s.batch, 1, 1, s.lk}) > 0.7;
        hide.select(3, 0).fill_(false);
        in.mask = hide;
        in.mask_keeps = false;  // masked_fill(scores, mask, finfo.min)
        in.fill = -3.4028234663852886e38;
        expect_matches(in, "fill mask " + name(s));
    }
}

TEST_P(OpsAttention, CausalBufferAsMaskSkipsBlocks) {
    // A GPT-2 causal buffer: the blocks above the diagonal are skipped; the result is exact.
    for (const Shape &s : {Shape{1, 2, 700, 700, 64, 64}, Shape{2, 3, 70, 150, 32, 32}}) {
        Inputs in = inputs(s);
        in.mask = at::ones({s.lk, s.lk}, at::kBool).tril().slice(0, s.lk - s.lq, s.lk);
        in.mask_keeps = true;
        in.fill = -1e4;
        expect_matches(in, "causal buffer " + name(s));
        in.fill = -3.4028234663852886e38;
        expect_matches(in, "causal buffer, finfo.min " + name(s));
    }
}

TEST_P(OpsAttention, HiddenBlocksThatStillWeighIn) {
    // A fill close to the scores: hidden key blocks change the result, so the rows are
    // computed again without skipping. 1100 keys: whole key blocks are hidden whatever the
    // kernel's block size (up to 512).
    const Shape s{1, 2, 70, 1100, 32, 32};
    Inputs in = inputs(s);
    in.mask = at::arange(s.lk).ge(64).view({1, 1, 1, s.lk}).expand({1, 1, s.lq, s.lk});
    in.mask_keeps = false;
    in.fill = -0.5;
    expect_matches(in, "fill -0.5");
    in.mask = c10::nullopt;
    at::Tensor bias = at::zeros({1, 1, s.lq, s.lk});
    bias.slice(3, 64).fill_(-1e31);  // below the hiding threshold, far below the scores: skipped
    in.bias = bias;
    expect_matches(in, "bias -1e31");
}

TEST_P(OpsAttention, StridedAndBroadcastOperands) {
    // q, k, v as [B, H, L, D] views of [B, L, H, D] (the projections' layout).
    const at::Tensor q = randn({2, 37, 4, 64}).transpose(1, 2);
    const at::Tensor k = randn({2, 41, 4, 64}).transpose(1, 2);
    const at::Tensor v = randn({2, 41, 4, 48}).transpose(1, 2);
    Inputs in{q, k, v};
    in.scale = 0.125;
    expect_matches(in, "transposed views");
    in.k = randn({2, 1, 41, 64});  // one key/value head shared by the query heads
    in.v = randn({2, 1, 41, 48});
    expect_matches(in, "broadcast key and value heads");
    in.q = randn({2, 4, 37, 80}).slice(3, 0, 64);  // rows longer than the head dim
    in.k = randn({2, 4, 64, 41}).transpose(2, 3);  // head dim not contiguous
    expect_matches(in, "sliced query, transposed key");
}

TEST_P(OpsAttention, RanksThreeAndFive) {
    Inputs in{randn({6, 19, 40}), randn({6, 23, 40}), randn({6, 23, 24})};
    in.scale = 0.3;
    in.bias = at::randn({6, 19, 23});
    expect_matches(in, "rank 3");
    Inputs five{randn({2, 2, 3, 9, 32}), randn({2, 2, 3, 11, 32}), randn({2, 2, 3, 11, 32})};
    five.causal = true;
    expect_matches(five, "rank 5");
}

TEST_P(OpsAttention, RankFourOutputIsLaidOutForTheMergeOfHeads) {
    const at::Tensor out = run(inputs({2, 3, 5, 7, 32, 32}));
    EXPECT_TRUE(out.permute({0, 2, 1, 3}).is_contiguous());
}

TEST_P(OpsAttention, RowsWithNoVisibleKey) {
    Inputs in = inputs({1, 2, 9, 4, 32, 32});
    in.causal = true;  // queries 0-4 see no key (lq > lk)
    const at::Tensor got = run(in).to(at::kFloat);
    EXPECT_TRUE(got.slice(2, 0, 5).isnan().all().item<bool>());
    EXPECT_FALSE(got.slice(2, 5).isnan().any().item<bool>());
    Inputs padded = inputs({1, 1, 3, 40, 32, 32});
    padded.bias = at::full({1, 1, 3, 40}, kNegInf);  // every key -inf: NaN, as softmax gives
    EXPECT_TRUE(run(padded).isnan().all().item<bool>());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OpsAttention, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto &info) { return std::string(c10::toString(info.param)); });

TEST(OpsAttentionFallback, AtenFallbackMatches) {
    // Mixed dtypes run the aten composition.
    at::manual_seed(2);
    Inputs in{at::randn({2, 11, 16}), at::randn({2, 13, 16}).to(at::kBFloat16), at::randn({2, 13, 8})};
    in.scale = 0.25;
    in.causal = true;
    const at::Tensor got = run(in);
    EXPECT_GT(cosine(got, naive(in)), 0.999);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
}

TEST(OpsAttentionErrors, MismatchedShapesAreInputErrors) {
    auto expect_input_error = [](const Inputs &in, const std::string &words) {
        try {
            run(in);
            FAIL() << "no error for " << words;
        } catch (const c10::Error &e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    expect_input_error({at::randn({2, 3, 8}), at::randn({2, 5, 9}), at::randn({2, 5, 4})}, "differ in their last dim");
    expect_input_error({at::randn({2, 3, 8}), at::randn({2, 5, 8}), at::randn({2, 6, 4})}, "numbers of positions");
    expect_input_error({at::randn({2, 3, 8}), at::randn({3, 5, 8}), at::randn({3, 5, 4})}, "do not broadcast");
    expect_input_error({at::randn({8}), at::randn({5, 8}), at::randn({5, 4})}, "at least 2 dims");
    Inputs bad_bias{at::randn({2, 3, 8}), at::randn({2, 5, 8}), at::randn({2, 5, 4})};
    bad_bias.bias = at::randn({2, 3, 4});
    expect_input_error(bad_bias, "does not broadcast");
    Inputs bad_mask{at::randn({2, 3, 8}), at::randn({2, 5, 8}), at::randn({2, 5, 4})};
    bad_mask.mask = at::ones({2, 3, 5}, at::kInt);
    expect_input_error(bad_mask, "not bool");
}

}  // namespace
}  // namespace ipex::ops
