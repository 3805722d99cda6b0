// fuse_channel_shuffle on frozen scripted modules: every spelling of the shuffle (view or
// reshape at either end, transpose either way round or permute, contiguous or not before a
// reshape, sizes from size queries or constants) becomes one ipex::channel_shuffle, the cat
// before it folded in when only size queries read it besides; chains whose pieces have other
// readers, or whose result is a graph output, stay; a cat read by a size query counted from the
// end (whose dim the pass cannot tell without the rank) stays too. Op counts before and after, and outputs
// equal to the unmodified graph's, fp32 and bf16, NCHW and channels-last. A chunk along the
// channels as the shuffle's only reader joins the op (ipex::channel_shuffle_chunk) unless its
// list is a graph output; a plain contiguous() before the first view read by it alone joins too.
#include <gtest/gtest.h>

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <string>
#include <vector>

#include "pass_test_utils.h"
#include "passes/fuse_channel_shuffle.h"

namespace ipex::passes {
namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

struct ShuffleCase {
    std::string name;
    std::string body;  // forward(self, x), x: 2 x 12 x 5 x 6
    int shuffles;      // ipex::channel_shuffle after
    int with_cat;      // of which with the cat folded in
    int skipped = 0;   // graph outputs left alone
    int with_chunk = 0;  // of which ipex::channel_shuffle_chunk (the chunk after folded in)
};

class FuseChannelShuffle : public ::testing::TestWithParam<ShuffleCase> {};

TEST_P(FuseChannelShuffle, CountsAndOutputs) {
    const ShuffleCase &c = GetParam();
    auto frozen = testing::freeze(testing::make_module("Shuffle", "def forward(self, x):\n" + c.body, {}));
    const GraphPtr original = frozen.graph->copy();
    const int cats_before = testing::count(original, "aten::cat");
    const int transposes_before = testing::count(original, "aten::transpose") + testing::count(original, "aten::permute");
    const PassResult r = fuse_channel_shuffle(frozen.graph);
    torch::jit::EliminateDeadCode(frozen.graph);
    EXPECT_EQ(testing::count(frozen.graph, "ipex::channel_shuffle") + testing::count(frozen.graph, "ipex::channel_shuffle_chunk"),
              c.shuffles)
        << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "ipex::channel_shuffle_chunk"), c.with_chunk) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::chunk"), testing::count(original, "aten::chunk") - c.with_chunk)
        << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::cat"), cats_before - c.with_cat) << *frozen.graph;
    EXPECT_EQ(testing::count(frozen.graph, "aten::transpose") + testing::count(frozen.graph, "aten::permute"),
              transposes_before - c.shuffles)
        << *frozen.graph;
    EXPECT_EQ(r.count, c.shuffles);
    EXPECT_EQ(r.changed, c.shuffles > 0);
    EXPECT_EQ(r.details["with_cat"].get<int>(), c.with_cat);
    EXPECT_EQ(r.details["with_chunk"].get<int>(), c.with_chunk);
    EXPECT_EQ(static_cast<int>(r.skipped.size()), c.skipped);
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
        for (const bool channels_last : {false, true}) {
            at::Tensor x = at::randn({2, 12, 5, 6}).to(dtype);
            if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
            const auto want = testing::flatten_tensors(testing::run_graph(original, frozen.module, {x}));
            const auto got = testing::flatten_tensors(testing::run_graph(frozen.graph, frozen.module, {x}));
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) {
                EXPECT_EQ(got[i].sizes(), want[i].sizes()) << c.name;
                EXPECT_EQ(got[i].scalar_type(), want[i].scalar_type()) << c.name;
                // bit copies and the same elementwise ops: equal
                EXPECT_TRUE(at::equal(got[i], want[i])) << c.name << " " << dtype << (channels_last ? " cl" : "");
            }
        }
    }
}

// The block of ShuffleNet v2 as torchvision writes it, with the size queries a trace leaves.
const char *kTorchvision = R"(    a, b = x.chunk(2, 1)
    y = torch.cat([a, torch.relu(b)], 1)
    n = y.size(0)
    c = y.size(1)
    h = y.size(2)
    w = y.size(3)
    y = y.view(n, 2, c // 2, h, w)
    y = torch.transpose(y, 1, 2).contiguous()
    y = y.view(n, -1, h, w)
    return y * 2.0
)";

INSTANTIATE_TEST_SUITE_P(
    Forms, FuseChannelShuffle,
    ::testing::Values(
        ShuffleCase{"torchvision", kTorchvision, 1, 1},
        ShuffleCase{"chunked", R"(    y = torch.cat([x, x * 2.0], 1)
    y = y.view(2, 2, 12, 5, 6).transpose(1, 2).contiguous().view(2, 24, 5, 6)
    a, b = y.chunk(2, 1)
    return torch.relu(a), b + 1.0
)", 1, 1, 0, 1},
        ShuffleCase{"contiguous_before_the_first_view", R"(    y = torch.cat([x, x * 2.0], 1).contiguous()
    y = y.view(2, 2, 12, 5, 6).transpose(1, 2).contiguous().view(2, 24, 5, 6)
    a, b = y.chunk(2, 1)
    return torch.relu(a), b + 1.0
)", 1, 1, 0, 1},
        ShuffleCase{"contiguous_read_elsewhere", R"(    y = torch.cat([x, x * 2.0], 1).contiguous()
    z = y.view(2, 2, 12, 5, 6).transpose(1, 2).contiguous().view(2, 24, 5, 6)
    return z + y
)", 1, 0},
        ShuffleCase{"chunked_three_uneven", R"(    y = x.view(2, 2, 6, 5, 6).transpose(1, 2).contiguous().view(2, 12, 5, 6)
    a, b, c, d = y.chunk(5, 1)
    return a + 1.0, b * 2.0, c - 1.0, d
)", 1, 0, 0, 1},
        ShuffleCase{"chunk_along_other_dim", R"(    y = x.view(2, 2, 6, 5, 6).transpose(1, 2).contiguous().view(2, 12, 5, 6)
    a, b = y.chunk(2, 2)
    return a + 1.0, b * 2.0
)", 1, 0, 0, 0},
        ShuffleCase{"chunks_returned", R"(    y = x.view(2, 2, 6, 5, 6).transpose(1, 2).contiguous().view(2, 12, 5, 6)
    return y.chunk(2, 1)
)", 1, 0, 0, 0},
        ShuffleCase{"size_list", R"(    y = torch.cat([x, x + 1.0], 1)
    n, c, h, w = y.size()
    y = y.view(n, 3, c // 3, h, w).transpose(2, 1).contiguous().view(n, c, h, w)
    return y + 1.0
)", 1, 0},
        ShuffleCase{"permute_reshape", R"(    y = x.reshape(2, 4, 3, 5, 6).permute(0, 2, 1, 3, 4).reshape(2, 12, 5, 6)
    return torch.relu(y)
)", 1, 0},
        ShuffleCase{"reshape_after_contiguous", R"(    y = x.view(2, 2, 6, 5, 6).transpose(-4, -3).contiguous().reshape(2, 12, 5, 6)
    return y[:, :6] + y[:, 6:]
)", 1, 0},
        ShuffleCase{"cat_read_elsewhere", R"(    y = torch.cat([x, x], 1)
    z = y.view(2, 2, 12, 5, 6).transpose(1, 2).contiguous().view(2, 24, 5, 6)
    return z + y
)", 1, 0},
        ShuffleCase{"three_inputs", R"(    y = torch.cat([x, x * 2.0, x - 1.0], 1)
    z = y.view(2, 3, 12, 5, 6).transpose(1, 2).contiguous().view(2, 36, 5, 6)
    return z * 2.0
)", 1, 1},
        ShuffleCase{"size_from_the_end", R"(    y = torch.cat([x, x * 2.0], 1)
    z = y.view(2, 2, 12, y.size(2), y.size(-1)).transpose(1, 2).contiguous().view(2, 24, 5, 6)
    return z * 2.0
)", 1, 0},
        ShuffleCase{"graph_output", R"(    return x.view(2, 2, 6, 5, 6).transpose(1, 2).contiguous().view(2, 12, 5, 6)
)", 0, 0, 1},
        ShuffleCase{"transposed_read_twice", R"(    t = x.view(2, 2, 6, 5, 6).transpose(1, 2)
    return t.contiguous().view(2, 12, 5, 6) + 1.0, t
)", 0, 0},
        ShuffleCase{"dims_from_the_end_of_a_4d_view", R"(    y = x.view(2, 2, 6, 30).transpose(-4, -3).contiguous().view(2, 12, 5, 6)
    return y + 1.0
)", 0, 0},
        ShuffleCase{"in_a_returned_tuple", R"(    y = x.view(2, 2, 6, 5, 6).transpose(1, 2).contiguous().view(2, 12, 5, 6)
    return y, x + 1.0
)", 0, 0, 1},
        ShuffleCase{"other_transpose", R"(    y = x.view(2, 2, 6, 5, 6).transpose(1, 3).contiguous().view(2, 12, 5, 6)
    return y + 1.0
)", 0, 0},
        ShuffleCase{"no_contiguous_before_view", R"(    y = x.reshape(2, 2, 6, 5, 6).transpose(1, 2)
    return y.sum(1)
)", 0, 0}),
    [](const ::testing::TestParamInfo<ShuffleCase> &info) { return info.param.name; });

}  // namespace
}  // namespace ipex::passes
