#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "llm/attention.h"
#include "llm/kernels.h"

namespace ipex::llm {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> v(n);
    for (auto &x : v) x = d(rng);
    return v;
}

// The AVX-512 blocks equal the portable ones for fp32 and bf16 caches, odd row counts and
// key ranges that end mid-vector.
TEST(LlmKernels, BlocksMatchPortable) {
    if (!kernels::avx512_ok()) GTEST_SKIP() << "no AVX-512 on this CPU";
    for (auto type : {kernels::CacheType::f32, kernels::CacheType::bf16})
        for (int64_t hd : {16, 48, 64})
            for (int64_t rows : {1, 5, 8, 11}) {
                const int64_t ld = 83, t0 = 3, t1 = 70;
                const auto q = random_vec(static_cast<size_t>(rows * hd), 1);
                const auto kf = random_vec(static_cast<size_t>(hd * ld), 2);
                std::vector<uint16_t> kb(kf.size());
                for (size_t i = 0; i < kf.size(); ++i) kb[i] = kernels::to_bf16(kf[i]);
                const void *k = type == kernels::CacheType::f32 ? static_cast<const void *>(kf.data()) : kb.data();
                std::vector<float> s1(static_cast<size_t>(rows * 80)), s2(s1.size());
                kernels::qk_block_ref(type, q.data(), hd, rows, k, ld, t0, t1, hd, s1.data(), 80);
                kernels::qk_block_avx512(type, q.data(), hd, rows, k, ld, t0, t1, hd, s2.data(), 80);
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t t = 0; t < t1 - t0; ++t) EXPECT_NEAR(s1[r * 80 + t], s2[r * 80 + t], 1e-3);
                // pv over V [ld][hd]: same buffer reinterpreted
                std::vector<float> o1(static_cast<size_t>(rows * hd), 0.5f), o2 = o1;
                kernels::pv_block_ref(type, s1.data(), 80, rows, k, t0, std::min<int64_t>(t1, ld), hd, o1.data(), hd);
                kernels::pv_block_avx512(type, s1.data(), 80, rows, k, t0, std::min<int64_t>(t1, ld), hd, o2.data(), hd);
                for (size_t i = 0; i < o1.size(); ++i) EXPECT_NEAR(o1[i], o2[i], 1e-2 * (1 + std::fabs(o1[i])));
            }
}

// The vectorized softmax (its own exp) equals the portable one over lengths that end
// mid-vector, scores far apart (probabilities that underflow) and rows past the first.
TEST(LlmKernels, SoftmaxRowsMatchPortable) {
    if (!kernels::avx512_ok()) GTEST_SKIP() << "no AVX-512 on this CPU";
    for (int64_t n : {1, 15, 16, 17, 100, 2049})
        for (int64_t rows : {1, 3, 8})
            for (float spread : {1.f, 40.f}) {
                const int64_t lds = n + 5;
                auto s1 = random_vec(static_cast<size_t>(rows * lds), static_cast<uint32_t>(n + rows));
                for (auto &v : s1) v *= spread;
                auto s2 = s1;
                kernels::softmax_rows_ref(s1.data(), rows, lds, n, 0.125f);
                kernels::softmax_rows_avx512(s2.data(), rows, lds, n, 0.125f);
                for (int64_t r = 0; r < rows; ++r) {
                    for (int64_t i = 0; i < n; ++i)
                        EXPECT_NEAR(s1[r * lds + i], s2[r * lds + i], 1e-6 + 1e-5 * s1[r * lds + i]) << n << " " << r;
                    for (int64_t i = n; i < lds; ++i) EXPECT_EQ(s1[r * lds + i], s2[r * lds + i]);  // untouched
                }
            }
}

// Prefill attention's online softmax step, vectorized against the portable one: blocks with
// keys hidden at both ends, wholly hidden, a row with nothing visible yet, a running max that
// a later block raises (acc and sum rescaled), lengths that end mid-vector.
TEST(LlmKernels, OnlineSoftmaxBlockMatchesPortable) {
    if (!kernels::avx512_ok()) GTEST_SKIP() << "no AVX-512 on this CPU";
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const int64_t hd = 48;
    struct Range { int64_t lo, hi; };
    for (int64_t n : {1, 15, 16, 17, 64})
        for (Range r : {Range{0, n}, Range{3, n - 2}, Range{-5, n + 9}, Range{n, n + 3}, Range{-4, 0}, Range{2, 1}})
            for (float m0 : {neg_inf, 0.5f, 6.f}) {
                auto s1 = random_vec(static_cast<size_t>(n), static_cast<uint32_t>(n * 7 + r.lo));
                for (auto &v : s1) v *= 8.f;
                auto s2 = s1;
                std::vector<float> acc1 = random_vec(static_cast<size_t>(hd), 3), acc2 = acc1;
                if (m0 == neg_inf) std::fill(acc1.begin(), acc1.end(), 0.f), acc2 = acc1;
                float mx1 = m0, mx2 = m0, sum1 = m0 == neg_inf ? 0.f : 2.5f, sum2 = sum1;
                kernels::online_softmax_block_ref(s1.data(), n, r.lo, r.hi, 0.25f, 0.f, &mx1, &sum1, acc1.data(), hd);
                kernels::online_softmax_block_avx512(s2.data(), n, r.lo, r.hi, 0.25f, &mx2, &sum2, acc2.data(), hd);
                const std::string where = "n " + std::to_string(n) + " [" + std::to_string(r.lo) + ", " +
                                          std::to_string(r.hi) + ") m0 " + std::to_string(m0);
                EXPECT_EQ(mx1, mx2) << where;
                EXPECT_NEAR(sum1, sum2, 1e-5 * (1 + std::fabs(sum1))) << where;
                for (int64_t j = 0; j < n; ++j) {
                    if (s1[j] == 0.f) EXPECT_EQ(s2[j], 0.f) << where << " j " << j;  // hidden stays exactly 0
                    EXPECT_NEAR(s1[j], s2[j], 1e-6 + 1e-5 * s1[j]) << where << " j " << j;
                }
                for (int64_t d = 0; d < hd; ++d) EXPECT_NEAR(acc1[d], acc2[d], 1e-5 * (1 + std::fabs(acc1[d]))) << where;
            }
}

// silu(gate) * up, vectorized against the portable loop over a row that ends mid-vector.
TEST(LlmKernels, SiluMulMatchesPortable) {
    if (!kernels::avx512_ok()) GTEST_SKIP() << "no AVX-512 on this CPU";
    for (int64_t inter : {1, 16, 37}) {
        auto gu = random_vec(static_cast<size_t>(3 * 2 * inter), static_cast<uint32_t>(inter));
        for (auto &v : gu) v *= 6.f;
        std::vector<float> o1(static_cast<size_t>(3 * inter)), o2(o1.size());
        kernels::silu_mul_ref(gu.data(), o1.data(), 3, inter);
        kernels::silu_mul_avx512(gu.data(), o2.data(), 3, inter);
        for (size_t i = 0; i < o1.size(); ++i) EXPECT_NEAR(o1[i], o2[i], 1e-6 * (1 + std::fabs(o1[i]))) << inter << " " << i;
    }
}

// The W8A8 quantize step, vectorized against the portable loop bit for bit: fp32 and bf16
// inputs, ties, values past the clamp, NaN and infinities, rows that end mid-vector.
TEST(LlmKernels, QuantizeRowS8MatchesPortable) {
    if (!kernels::avx512_ok()) GTEST_SKIP() << "no AVX-512 on this CPU";
    for (int64_t k : {1, 16, 37, 300}) {
        auto x = random_vec(static_cast<size_t>(k), static_cast<uint32_t>(k + 11));
        for (int64_t j = 0; j < k; ++j) x[j] = j % 5 == 0 ? std::round(x[j] * 40.f) + 0.5f : x[j] * 90.f;
        if (k > 4) {
            x[1] = std::numeric_limits<float>::quiet_NaN();
            x[2] = std::numeric_limits<float>::infinity();
            x[3] = -1e30f;
        }
        std::vector<float> m(static_cast<size_t>(k));
        for (int64_t j = 0; j < k; ++j) m[j] = j % 3 == 0 ? 1.f : 0.75f + 0.01f * static_cast<float>(j % 7);
        std::vector<uint16_t> xb(x.size());
        for (size_t i = 0; i < x.size(); ++i) xb[i] = kernels::to_bf16(x[i]);
        std::vector<int8_t> a(x.size()), b(x.size()), c(x.size()), d(x.size());
        kernels::quantize_row_s8_ref(x.data(), m.data(), a.data(), k);
        kernels::quantize_row_s8_avx512(x.data(), m.data(), b.data(), k);
        kernels::quantize_row_s8_ref(xb.data(), m.data(), c.data(), k);
        kernels::quantize_row_s8_avx512(xb.data(), m.data(), d.data(), k);
        EXPECT_EQ(a, b) << "fp32, k " << k;
        EXPECT_EQ(c, d) << "bf16, k " << k;
    }
}

// NaN through the decoder's exp kernels as through aten's ops: a NaN score makes its row of
// probabilities NaN in both softmaxes (the vectorized exp keeps NaN) and leaves the other rows
// as they were; silu_mul is aten's silu(gate) * up, NaN where that is (silu(-inf) among them).
TEST(LlmKernels, NanThroughSoftmaxAndSiluMul) {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const int64_t rows = 3, n = 37, lds = 40;
    auto scores = random_vec(static_cast<size_t>(rows * lds), 9);
    scores[1 * lds + 20] = nan;
    const at::Tensor want = at::softmax(at::tensor(scores).view({rows, lds}).narrow(1, 0, n) * 0.125, 1);
    for (bool vectorized : {false, true}) {
        if (vectorized && !kernels::avx512_ok()) continue;
        auto s = scores;
        (vectorized ? kernels::softmax_rows_avx512 : kernels::softmax_rows_ref)(s.data(), rows, lds, n, 0.125f);
        const at::Tensor got = at::tensor(s).view({rows, lds}).narrow(1, 0, n);
        EXPECT_TRUE(got.isnan().equal(want.isnan())) << (vectorized ? "avx512" : "portable");
        EXPECT_TRUE(got[1].isnan().all().item<bool>());
        for (int64_t r : {0, 2}) EXPECT_TRUE(at::allclose(got[r], want[r], 1e-5, 1e-7)) << r;
    }
    const int64_t inter = 8;
    const std::vector<float> gu = {nan, inf, -inf, 0.f, -3.f, 2.f, -100.f, 100.f,  // gates
                                   1.f, 2.f, 3.f, inf, 0.5f, nan, -1.f, -inf};     // ups
    std::vector<float> out(inter);
    kernels::silu_mul(gu.data(), out.data(), 1, inter);
    const at::Tensor g = at::tensor(gu).narrow(0, 0, inter), u = at::tensor(gu).narrow(0, inter, inter);
    const at::Tensor expected = at::silu(g) * u, result = at::tensor(out);
    EXPECT_TRUE(result.isnan().equal(expected.isnan())) << result << expected;
    EXPECT_TRUE(at::allclose(result, expected, 1e-6, 1e-30, /*equal_nan=*/true)) << result << expected;
}

// Gemma's MLP and soft-capping against aten in double: gelu(tanh form)(gate) * up, and
// cap * tanh(x * scale / cap); a partial rotation turns only its leading channels.
TEST(LlmKernels, GeluTanhMulSoftcapAndPartialRope) {
    const int64_t rows = 3, inter = 29;
    auto big = random_vec(static_cast<size_t>(rows * 2 * inter), 11);
    for (float &v : big) v *= 4;  // well into tanh's bend
    std::vector<float> out(static_cast<size_t>(rows * inter));
    kernels::gelu_tanh_mul(big.data(), out.data(), rows, inter);
    const at::Tensor t = at::tensor(big).to(at::kDouble).view({rows, 2 * inter});
    const at::Tensor want = at::gelu(t.narrow(1, 0, inter), "tanh") * t.narrow(1, inter, inter);
    EXPECT_TRUE(at::allclose(at::tensor(out).to(at::kDouble).view({rows, inter}), want, 1e-5, 1e-6));

    std::vector<float> x = big;
    kernels::softcap(x.data(), static_cast<int64_t>(x.size()), 0.5f, 3.f);
    const at::Tensor capped = 3.0 * at::tanh(at::tensor(big).to(at::kDouble) * 0.5 / 3.0);
    EXPECT_TRUE(at::allclose(at::tensor(x).to(at::kDouble), capped, 1e-6, 1e-7));

    const int64_t heads = 2, hd = 16, rot = 12;
    auto q = random_vec(static_cast<size_t>(heads * hd), 12);
    const auto before = q;
    std::vector<float> cs(rot / 2), sn(rot / 2);
    for (int64_t i = 0; i < rot / 2; ++i) {
        cs[i] = std::cos(0.3f * static_cast<float>(i + 1));
        sn[i] = std::sin(0.3f * static_cast<float>(i + 1));
    }
    kernels::rope_row(q.data(), heads, hd, rot, cs.data(), sn.data());
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < hd; ++i) {
            const float *b = before.data() + h * hd;
            float want_i = b[i];  // channels past rot pass unchanged
            if (i < rot / 2) want_i = b[i] * cs[i] - b[i + rot / 2] * sn[i];
            else if (i < rot) want_i = b[i] * cs[i - rot / 2] + b[i - rot / 2] * sn[i - rot / 2];
            EXPECT_NEAR(q[h * hd + i], want_i, 1e-6) << h << " " << i;
        }
}

TEST(LlmKernels, RmsNormAndAddRmsNorm) {
    const int64_t n = 37;
    auto x = random_vec(static_cast<size_t>(2 * n), 3), w = random_vec(static_cast<size_t>(n), 4);
    auto d = random_vec(static_cast<size_t>(2 * n), 5);
    std::vector<float> y(x.size()), y2(x.size());
    auto h = x;
    kernels::add_rms_norm(h.data(), d.data(), w.data(), y.data(), 2, n, 1e-5f);
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
    kernels::rms_norm(x.data(), w.data(), y2.data(), 2, n, 1e-5f);
    for (int64_t r = 0; r < 2; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += x[r * n + i] * x[r * n + i];
        const double inv = 1 / std::sqrt(ss / n + 1e-5);
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_NEAR(y2[r * n + i], x[r * n + i] * inv * w[i], 1e-5);
            EXPECT_FLOAT_EQ(y[r * n + i], y2[r * n + i]);
            EXPECT_FLOAT_EQ(h[r * n + i], x[r * n + i]);
        }
    }
}

// Blocked prefill attention (online softmax over key blocks) against a naive softmax with a
// full [L, L] score matrix, with grouped-query heads and a sliding window.
TEST(LlmKernels, PrefillAndDecodeAttentionMatchNaive) {
    for (int64_t window : {0, 40})
        for (auto type : {kernels::CacheType::f32, kernels::CacheType::bf16}) {
            const int64_t heads = 4, kv = 2, hd = 16, len = 300, group = heads / kv;
            KvCache cache(type, 1, 1, kv, hd, 320);
            const auto q = random_vec(static_cast<size_t>(len * heads * hd), 6);
            const auto k = random_vec(static_cast<size_t>(len * kv * hd), 7);
            const auto v = random_vec(static_cast<size_t>(len * kv * hd), 8);
            for (int64_t p = 0; p < len; ++p) cache.write(0, 0, p, k.data() + p * kv * hd, v.data() + p * kv * hd);
            AttentionShape shape{heads, kv, hd, window, 0.25f};
            std::vector<float> out(static_cast<size_t>(len * heads * hd));
            prefill_attention(cache, 0, shape, q.data(), heads * hd, 0, 0, len, out.data(), heads * hd);
            std::vector<float> dec(static_cast<size_t>(heads * hd));
            const int64_t length = len;
            decode_attention(cache, 0, shape, q.data() + (len - 1) * heads * hd, heads * hd, &length, 1, dec.data(),
                             heads * hd);
            const auto kval = [&](const std::vector<float> &src, int64_t t, int64_t h, int64_t d) {
                const float x = src[static_cast<size_t>((t * kv + h) * hd + d)];
                return type == kernels::CacheType::bf16 ? kernels::from_bf16(kernels::to_bf16(x)) : x;
            };
            for (int64_t i : {0L, 1L, 63L, 200L, len - 1})
                for (int64_t h = 0; h < heads; ++h) {
                    const int64_t g = h / group;
                    std::vector<double> s(static_cast<size_t>(i + 1));
                    double m = -1e30;
                    for (int64_t t = 0; t <= i; ++t) {
                        double acc = 0;
                        for (int64_t d = 0; d < hd; ++d) acc += q[static_cast<size_t>((i * heads + h) * hd + d)] * kval(k, t, g, d);
                        s[static_cast<size_t>(t)] = (window && i - t >= window) ? -1e30 : acc * 0.25;
                        m = std::max(m, s[static_cast<size_t>(t)]);
                    }
                    double sum = 0;
                    for (auto &x : s) sum += x = std::exp(x - m);
                    for (int64_t d = 0; d < hd; ++d) {
                        double o = 0;
                        for (int64_t t = 0; t <= i; ++t) o += s[static_cast<size_t>(t)] / sum * kval(v, t, g, d);
                        EXPECT_NEAR(out[static_cast<size_t>((i * heads + h) * hd + d)], o, 1e-4) << i << " " << h;
                        if (i == len - 1) EXPECT_NEAR(dec[static_cast<size_t>(h * hd + d)], o, 1e-4);
                    }
                }
        }
}

}  // namespace
}  // namespace ipex::llm
