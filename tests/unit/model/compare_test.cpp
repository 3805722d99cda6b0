#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "model/compare.h"

using ipex::model::compare_outputs;
using ipex::model::Tolerance;

TEST(Compare, MetricsMatchANaiveReference) {
    at::manual_seed(1);
    const at::Tensor a = at::randn({4, 10});
    const at::Tensor b = a + 0.01 * at::randn({4, 10});
    const auto diffs = compare_outputs(a, b, Tolerance{});
    ASSERT_EQ(diffs.size(), 1u);
    const auto &d = diffs[0];
    double max_abs = 0, dot = 0, na = 0, nb = 0, ref_max = 0, max_rel = 0;
    auto pa = a.contiguous().data_ptr<float>(), pb = b.contiguous().data_ptr<float>();
    for (int i = 0; i < 40; ++i) ref_max = std::max(ref_max, std::abs(double(pa[i])));
    int agree = 0;
    for (int i = 0; i < 40; ++i) {
        const double diff = std::abs(double(pa[i]) - double(pb[i]));
        max_abs = std::max(max_abs, diff);
        max_rel = std::max(max_rel, diff / std::max(std::abs(double(pa[i])), 1e-3 * ref_max));
        dot += double(pa[i]) * pb[i];
        na += double(pa[i]) * pa[i];
        nb += double(pb[i]) * pb[i];
    }
    for (int r = 0; r < 4; ++r) {
        int ia = 0, ib = 0;
        for (int c = 1; c < 10; ++c) {
            if (pa[r * 10 + c] > pa[r * 10 + ia]) ia = c;
            if (pb[r * 10 + c] > pb[r * 10 + ib]) ib = c;
        }
        agree += ia == ib;
    }
    EXPECT_NEAR(d.max_abs_err, max_abs, 1e-9);
    EXPECT_NEAR(d.max_rel_err, max_rel, 1e-9);
    EXPECT_NEAR(d.cosine, dot / std::sqrt(na * nb), 1e-12);
    ASSERT_TRUE(d.argmax_agreement);
    EXPECT_NEAR(*d.argmax_agreement, agree / 4.0, 1e-12);
    EXPECT_FALSE(d.ok);  // 1% noise is outside the fp32 default cosine 0.99999
    EXPECT_TRUE(compare_outputs(a, b, ipex::model::default_tolerance("bf16"))[0].ok);
}

TEST(Compare, DefaultCosinePerDtype) {
    EXPECT_EQ(ipex::model::default_tolerance("fp32").min_cosine, 0.99999);
    EXPECT_EQ(ipex::model::default_tolerance("bf16").min_cosine, 0.999);
    EXPECT_EQ(ipex::model::default_tolerance("fp16").min_cosine, 0.999);
    EXPECT_EQ(ipex::model::default_tolerance("int8").min_cosine, 0.99);
    // Noise that takes the cosine to about 0.995 passes for int8 only.
    at::manual_seed(3);
    const at::Tensor a = at::randn({4096});
    const at::Tensor b = a + 0.1 * at::randn({4096});
    EXPECT_FALSE(compare_outputs(a, b, ipex::model::default_tolerance("bf16"))[0].ok);
    EXPECT_TRUE(compare_outputs(a, b, ipex::model::default_tolerance("int8"))[0].ok);
}

TEST(Compare, AbsoluteAndRelativeBounds) {
    const at::Tensor a = at::tensor({1.0f, 100.0f});
    const at::Tensor b = at::tensor({1.05f, 100.0f});
    Tolerance t = ipex::model::default_tolerance("bf16");
    t.atol = 0.01;
    EXPECT_FALSE(compare_outputs(a, b, t)[0].ok);
    t.atol = 0.06;
    EXPECT_TRUE(compare_outputs(a, b, t)[0].ok);
    t.atol = 0.0;
    t.rtol = 0.06;
    EXPECT_TRUE(compare_outputs(a, b, t)[0].ok);
}

TEST(Compare, FlattensNestedOutputsAndChecksStructure) {
    c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
    dict.insert("logits", at::ones({2, 3}));
    const c10::IValue a = c10::ivalue::Tuple::create({at::zeros({2}), dict});
    const auto flat = ipex::model::flatten_outputs(a);
    ASSERT_EQ(flat.size(), 2u);
    EXPECT_EQ(flat[0].first, "0");
    EXPECT_EQ(flat[1].first, "1.logits");
    const auto same = compare_outputs(a, a, Tolerance{});
    EXPECT_TRUE(same[0].ok && same[1].ok);
    const auto shape = compare_outputs(at::ones({2, 3}), at::ones({3, 2}), Tolerance{});
    EXPECT_FALSE(shape[0].ok);
    EXPECT_NE(shape[0].problem.find("shape"), std::string::npos);
    const auto structure = compare_outputs(a, at::ones({2}), Tolerance{});
    EXPECT_FALSE(structure[0].ok);
}

TEST(Compare, IntegerOutputsMustBeEqualAndNaNsMustAgree) {
    EXPECT_FALSE(compare_outputs(at::tensor({1, 2}), at::tensor({1, 3}), Tolerance{})[0].ok);
    EXPECT_TRUE(compare_outputs(at::tensor({1, 2}), at::tensor({1, 2}), Tolerance{})[0].ok);
    const at::Tensor n = at::tensor({1.0f, NAN, 3.0f});
    EXPECT_TRUE(compare_outputs(n, n.clone(), Tolerance{})[0].ok);
    EXPECT_FALSE(compare_outputs(n, at::tensor({1.0f, 2.0f, 3.0f}), Tolerance{})[0].ok);
}
