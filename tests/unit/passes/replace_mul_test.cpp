// replace_mul on frozen scripted modules: every aten::mul of two tensors becomes
// ipex::scale_mul, the product by a scalar stays; outputs against the unmodified graph, bit for
// bit, for fp32 and bf16, NCHW and channels-last inputs, with the scaled tensor a graph input,
// a value read again after the product, and a value whose last use is the product (the case
// whose storage the op may reuse).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/replace_mul.h"

namespace ipex::passes {
namespace {

struct MulCase {
    std::string name;
    std::string body;  // forward(self, x)
    int replaced;      // ipex::scale_mul after
    int left;          // aten::mul after
};

class ReplaceMul : public ::testing::TestWithParam<MulCase> {};

TEST_P(ReplaceMul, CountsAndOutputs) {
    const MulCase &c = GetParam();
    auto frozen = testing::freeze(testing::make_module("Net", "def forward(self, x):\n" + c.body));
    const auto original = frozen.graph->copy();
    const PassResult r = replace_mul(frozen.graph);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::scale_mul"), c.replaced) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::mul"), c.left) << *frozen.graph;
    EXPECT_EQ(r.count, c.replaced);
    EXPECT_EQ(r.changed, c.replaced > 0);
    EXPECT_EQ(r.details["scale_mul"].get<int>(), c.replaced);
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const bool channels_last : {false, true}) {
            at::Tensor x = at::randn({2, 24, 9, 7}).to(dtype);
            if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
            const at::Tensor before = x.clone();
            const auto want = testing::flatten_tensors(testing::run_graph(original, frozen.module, {x}));
            const auto got = testing::flatten_tensors(testing::run_graph(frozen.graph, frozen.module, {x}));
            EXPECT_TRUE(at::equal(x, before)) << c.name << ": the input changed";
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) {
                EXPECT_EQ(got[i].scalar_type(), want[i].scalar_type()) << c.name;
                EXPECT_TRUE(at::equal(got[i], want[i])) << c.name << " output " << i << " " << dtype
                                                        << (channels_last ? " channels-last" : "");
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Forms, ReplaceMul,
    ::testing::Values(
        // torchvision's squeeze-excitation: scale * input, the input a graph input
        MulCase{"gate_times_input", "    return torch.sigmoid(torch.mean(x, [2, 3], keepdim=True)) * x\n", 1, 0},
        // an intermediate whose last use is the product, either order
        MulCase{"last_use", "    y = torch.relu(x)\n    s = torch.sigmoid(y.mean([2, 3], keepdim=True))\n"
                            "    return y * s + 1\n", 1, 0},
        // the intermediate read again after the product: it must keep its values
        MulCase{"read_after", "    y = torch.relu(x)\n    z = torch.sigmoid(y.mean([2, 3], keepdim=True)) * y\n"
                              "    return z, y + 1\n", 1, 0},
        // a scale shared by every image, and an elementwise square
        MulCase{"shared_and_square", "    y = x + 1\n    s = torch.sigmoid(x.mean([0, 2, 3], keepdim=True))\n"
                                     "    return y * s, y.mul(y)\n", 2, 0},
        // by a Python number: aten::mul.Scalar stays
        MulCase{"scalar", "    return x * 2.0\n", 0, 1}),
    [](const ::testing::TestParamInfo<MulCase> &info) { return info.param.name; });

}  // namespace
}  // namespace ipex::passes
