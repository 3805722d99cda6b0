// ipex::channel_shuffle against aten's chain (cat, view, transpose, contiguous, view): bit-equal
// over 2 to 5 groups, odd channel counts per group (vector tails), one input or several cut at
// group boundaries or not, fp32 and bf16, with -1 in either size list; the gather path is taken
// exactly when its conditions hold (channels-last 4-D fp32/bf16), everything else runs the chain,
// errors included; the output never aliases an input. channel_shuffle_chunk: each chunk equal
// to aten::chunk's of the chain, written apart as a dense tensor when the chunks divide the
// channels. Each build of the two-group interleave (AVX-512, AVX2) against a scalar loop, where
// the CPU runs it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>
#include <string>
#include <vector>

#include "base/isa.h"
#include "ops/own_kernels.h"
#include "ops/shuffle_op.h"

namespace ipex::ops {
namespace {

at::Tensor chain(const std::vector<at::Tensor> &inputs, at::IntArrayRef grouped, at::IntArrayRef sizes) {
    return at::cat(inputs, 1).contiguous().view(grouped).transpose(1, 2).contiguous().view(sizes);
}

std::vector<at::Tensor> make_inputs(const std::vector<int64_t> &channels, int64_t n, int64_t h, int64_t w,
                                    at::ScalarType type, bool channels_last) {
    std::vector<at::Tensor> inputs;
    for (const int64_t c : channels) {
        at::Tensor t = at::randn({n, c, h, w}).to(type);
        if (channels_last) t = t.contiguous(at::MemoryFormat::ChannelsLast);
        inputs.push_back(t);
    }
    return inputs;
}

struct ShuffleCase {
    std::vector<int64_t> channels;  // of each input
    int64_t groups;
};

TEST(ChannelShuffle, GatherMatchesChain) {
    const std::vector<ShuffleCase> cases = {
        {{58, 58}, 2}, {{116}, 2}, {{3, 3}, 2},   {{17, 17}, 2}, {{33, 31}, 2}, {{40, 24}, 2},
        {{24, 24, 24}, 3}, {{30}, 3}, {{8, 12}, 4}, {{5, 5, 5, 5, 5}, 5}, {{2, 2}, 2}, {{64, 64}, 2}};
    for (const auto &c : cases) {
        int64_t total = 0;
        for (const int64_t k : c.channels) total += k;
        for (const auto type : {at::kFloat, at::kBFloat16}) {
            for (const auto &[n, h, w] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {2, 5, 7}, {3, 4, 4}}) {
                const auto inputs = make_inputs(c.channels, n, h, w, type, true);
                const std::vector<int64_t> grouped = {n, c.groups, total / c.groups, h, w};
                const std::vector<int64_t> sizes = {n, total, h, w};
                std::ostringstream what;
                what << at::IntArrayRef(c.channels) << " g" << c.groups << " " << type << " " << n << "x" << h << "x" << w;
                EXPECT_TRUE(channel_shuffle_gathers(inputs, grouped, sizes)) << what.str();
                const at::Tensor want = chain(inputs, grouped, sizes);
                const at::Tensor got = channel_shuffle(inputs, grouped, sizes);
                ASSERT_EQ(got.sizes(), want.sizes()) << what.str();
                EXPECT_EQ(got.scalar_type(), type);
                EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast)) << what.str();
                EXPECT_TRUE(at::equal(got, want)) << what.str();
                // -1 in either list
                const std::vector<int64_t> grouped_free = {n, c.groups, -1, h, w}, sizes_free = {n, -1, h, w};
                EXPECT_TRUE(at::equal(channel_shuffle(inputs, grouped_free, sizes_free), want)) << what.str();
                for (const at::Tensor &in : inputs) EXPECT_NE(got.data_ptr(), in.data_ptr());
            }
        }
    }
}

TEST(ChannelShuffle, BitCopiesSpecialValues) {
    // NaN payloads, infinities, signed zeros and denormals come through as bits.
    at::Tensor a = at::tensor({std::nanf(""), -0.f, 1e-40f, -INFINITY}).view({1, 4, 1, 1});
    at::Tensor b = at::tensor({INFINITY, 0.f, -1e-40f, 3.f}).view({1, 4, 1, 1});
    for (const auto type : {at::kFloat, at::kBFloat16}) {
        const std::vector<at::Tensor> inputs = {a.to(type).contiguous(at::MemoryFormat::ChannelsLast),
                                                b.to(type).contiguous(at::MemoryFormat::ChannelsLast)};
        const at::Tensor got = channel_shuffle(inputs, {1, 2, 4, 1, 1}, {1, 8, 1, 1});
        const at::Tensor want = chain(inputs, {1, 2, 4, 1, 1}, {1, 8, 1, 1});
        const auto bits = type == at::kFloat ? at::kInt : at::kShort;
        EXPECT_TRUE(at::equal(got.contiguous().view(bits), want.contiguous().view(bits))) << type;
    }
}

TEST(ChannelShuffle, OtherInputsRunTheChain) {
    const std::vector<int64_t> grouped = {2, 2, 6, 3, 5}, sizes = {2, 12, 3, 5};
    struct Other {
        std::string name;
        std::vector<at::Tensor> inputs;
    };
    std::vector<Other> others = {
        {"nchw", make_inputs({6, 6}, 2, 3, 5, at::kFloat, false)},
        {"double", make_inputs({6, 6}, 2, 3, 5, at::kDouble, true)},
        {"mixed dtypes", {make_inputs({6}, 2, 3, 5, at::kFloat, true)[0], make_inputs({6}, 2, 3, 5, at::kBFloat16, true)[0]}},
        {"strided view", {at::randn({2, 12, 3, 5}).contiguous(at::MemoryFormat::ChannelsLast).narrow(1, 0, 12)}},
    };
    others.back().inputs[0] = at::randn({2, 24, 3, 5}).contiguous(at::MemoryFormat::ChannelsLast).narrow(1, 6, 12);
    for (const auto &o : others) {
        EXPECT_FALSE(channel_shuffle_gathers(o.inputs, grouped, sizes)) << o.name;
        if (o.name == "mixed dtypes") {
            // aten's cat promotes; the chain's result is aten's
            EXPECT_TRUE(at::equal(channel_shuffle(o.inputs, grouped, sizes), chain(o.inputs, grouped, sizes)));
            continue;
        }
        const at::Tensor got = channel_shuffle(o.inputs, grouped, sizes);
        EXPECT_TRUE(at::equal(got, chain(o.inputs, grouped, sizes))) << o.name;
    }
    // sizes that are no shuffle: one group, one channel per group, a 5-D list that is not
    // [n, g, c / g, h, w], sizes that are not [n, c, h, w]
    const auto cl = make_inputs({6, 6}, 2, 3, 5, at::kFloat, true);
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> lists = {
        {{2, 1, 12, 3, 5}, {2, 12, 3, 5}}, {{2, 12, 1, 3, 5}, {2, 12, 3, 5}},
        {{2, 2, 6, 5, 3}, {2, 12, 5, 3}},  {{2, 2, 6, 3, 5}, {2, 12, 15}},
        {{1, 4, 6, 3, 5}, {1, 24, 3, 5}}};
    for (const auto &[g5, s] : lists) {
        EXPECT_FALSE(channel_shuffle_gathers(cl, g5, s)) << at::IntArrayRef(g5);
        const at::Tensor got = channel_shuffle(cl, g5, s);
        EXPECT_TRUE(at::equal(got, chain(cl, g5, s))) << at::IntArrayRef(g5);
    }
}

TEST(ChannelShuffle, ChunksAreWrittenApart) {
    const std::vector<ShuffleCase> cases = {{{58, 58}, 2}, {{6, 6}, 2}, {{24, 24, 24}, 3}, {{40, 24}, 2}, {{5, 5}, 2}};
    for (const auto &c : cases) {
        int64_t total = 0;
        for (const int64_t k : c.channels) total += k;
        for (const auto type : {at::kFloat, at::kBFloat16}) {
            const auto inputs = make_inputs(c.channels, 2, 5, 7, type, true);
            const std::vector<int64_t> grouped = {2, c.groups, total / c.groups, 5, 7}, sizes = {2, total, 5, 7};
            const at::Tensor shuffled = chain(inputs, grouped, sizes);
            for (const int64_t chunks : {1, 2, 3, 4, 5}) {
                std::ostringstream what;
                what << at::IntArrayRef(c.channels) << " g" << c.groups << " " << type << " chunks " << chunks;
                const auto want = at::chunk(shuffled, chunks, 1);
                const auto got = channel_shuffle_chunk(inputs, grouped, sizes, chunks);
                ASSERT_EQ(got.size(), want.size()) << what.str();
                for (size_t k = 0; k < got.size(); ++k) {
                    EXPECT_TRUE(at::equal(got[k], want[k])) << what.str() << " chunk " << k;
                    // dense channels-last chunks when the chunks divide the channels; aten's views else
                    if (total % chunks == 0)
                        EXPECT_TRUE(got[k].is_contiguous(at::MemoryFormat::ChannelsLast)) << what.str();
                    else
                        EXPECT_EQ(got[k].storage().data(), got[0].storage().data()) << what.str();
                }
            }
        }
    }
    // the chain's path (NCHW input) chunks its result as aten does; a bad count is aten's error
    const auto nchw = make_inputs({6, 6}, 2, 3, 5, at::kFloat, false);
    const auto got = channel_shuffle_chunk(nchw, {2, 2, 6, 3, 5}, {2, 12, 3, 5}, 2);
    const auto want = at::chunk(chain(nchw, {2, 2, 6, 3, 5}, {2, 12, 3, 5}), 2, 1);
    ASSERT_EQ(got.size(), 2u);
    for (size_t k = 0; k < 2; ++k) EXPECT_TRUE(at::equal(got[k], want[k]));
    const auto cl = make_inputs({6, 6}, 2, 3, 5, at::kFloat, true);
    EXPECT_THROW(channel_shuffle_chunk(cl, {2, 2, 6, 3, 5}, {2, 12, 3, 5}, 0), c10::Error);
}

// The first line of the message `fn` throws ("" when it returns; the rest is a backtrace).
template <typename Fn>
std::string error_of(Fn fn) {
    try {
        fn();
    } catch (const std::exception &e) {
        const std::string what = e.what();
        return what.substr(0, what.find('\n'));
    }
    return "";
}

TEST(ChannelShuffle, ErrorsAreAtens) {
    const auto cl = make_inputs({6, 6}, 2, 3, 5, at::kFloat, true);
    const auto other_batch = std::vector<at::Tensor>{cl[0], make_inputs({6}, 3, 3, 5, at::kFloat, true)[0]};
    struct Bad {
        std::vector<at::Tensor> inputs;
        std::vector<int64_t> grouped, sizes;
    };
    const std::vector<Bad> bad = {
        {cl, {2, 5, 6, 3, 5}, {2, 12, 3, 5}},    // wrong element count
        {cl, {2, 2, 6, 3, 5}, {2, 13, 3, 5}},
        {cl, {2, -1, -1, 3, 5}, {2, 12, 3, 5}},  // two -1s
        {{}, {2, 2, 6, 3, 5}, {2, 12, 3, 5}},    // no input
        {other_batch, {2, 2, 6, 3, 5}, {2, 12, 3, 5}},
    };
    for (const auto &b : bad) {
        const std::string want = error_of([&] { chain(b.inputs, b.grouped, b.sizes); });
        ASSERT_FALSE(want.empty()) << at::IntArrayRef(b.grouped);
        EXPECT_EQ(error_of([&] { channel_shuffle(b.inputs, b.grouped, b.sizes); }), want);
    }
}

// Each build of the interleave over channel counts with vector tails and source strides wider
// than the group, 2- and 4-byte values, bit for bit (NaN payloads are copied as bits).
template <typename T>
void check_interleave(void (*build)(const own_kernels::Interleave &), const char *name) {
    for (const int64_t cpg : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 58, 116}) {
        const int64_t pixels = 37, stride = cpg + 5;
        std::vector<T> a(pixels * stride), b(pixels * stride), got(pixels * 2 * cpg, T(0));
        for (size_t i = 0; i < a.size(); ++i) {
            a[i] = static_cast<T>(i * 2654435761u);
            b[i] = static_cast<T>(~i * 40503u);
        }
        own_kernels::Interleave p;
        p.bf16 = sizeof(T) == 2;
        p.a = a.data(), p.b = b.data(), p.a_stride = stride, p.b_stride = stride;
        p.dst = got.data(), p.cpg = cpg, p.pixels = pixels;
        build(p);
        int64_t wrong = 0;
        for (int64_t q = 0; q < pixels; ++q)
            for (int64_t j = 0; j < cpg; ++j) {
                const T *out = got.data() + q * 2 * cpg + 2 * j;
                wrong += out[0] != a[q * stride + j] || out[1] != b[q * stride + j];
            }
        EXPECT_EQ(wrong, 0) << name << " cpg " << cpg << " bytes " << sizeof(T);
    }
}

TEST(ChannelShuffle, InterleaveBuildsMatchScalar) {
    if (!isa::avx2()) GTEST_SKIP() << "this CPU has no AVX2: neither build runs";
    check_interleave<uint16_t>(own_kernels::run_interleave_avx2, "avx2");
    check_interleave<uint32_t>(own_kernels::run_interleave_avx2, "avx2");
    if (!isa::avx512()) GTEST_SKIP() << "this CPU has no AVX-512: the AVX-512 build is not run";
    check_interleave<uint16_t>(own_kernels::run_interleave_avx512, "avx512");
    check_interleave<uint32_t>(own_kernels::run_interleave_avx512, "avx512");
}

}  // namespace
}  // namespace ipex::ops
