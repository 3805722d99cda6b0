// base/text.h's edit distance against a naive recursive definition, and base/stats.h's peak RSS.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/stats.h"
#include "base/text.h"

namespace {

size_t naive_distance(const std::string &a, const std::string &b) {
    if (a.empty()) return b.size();
    if (b.empty()) return a.size();
    const std::string a1 = a.substr(1), b1 = b.substr(1);
    if (a[0] == b[0]) return naive_distance(a1, b1);
    return 1 + std::min({naive_distance(a1, b), naive_distance(a, b1), naive_distance(a1, b1)});
}

TEST(Text, EditDistanceMatchesTheDefinition) {
    EXPECT_EQ(ipex::edit_distance("", ""), 0u);
    EXPECT_EQ(ipex::edit_distance("optimize", "optimise"), 1u);
    EXPECT_EQ(ipex::edit_distance("--ninstance", "--ninstances"), 1u);
    EXPECT_EQ(ipex::edit_distance("kitten", "sitting"), 3u);
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
        std::string a(rng() % 7, 'a'), b(rng() % 7, 'a');
        for (char &c : a) c = static_cast<char>('a' + rng() % 3);
        for (char &c : b) c = static_cast<char>('a' + rng() % 3);
        EXPECT_EQ(ipex::edit_distance(a, b), naive_distance(a, b)) << a << " / " << b;
        EXPECT_EQ(ipex::edit_distance(a, b), ipex::edit_distance(b, a));
    }
}

TEST(Stats, PeakRssGrowsWithTouchedMemory) {
    const uint64_t before = ipex::peak_rss_bytes();
    EXPECT_GT(before, 0u);
    std::vector<char> block(before + (64u << 20), 1);  // more than was ever resident, touched
    volatile char sink = block[block.size() / 2];
    (void)sink;
    EXPECT_GE(ipex::peak_rss_bytes(), before + (32u << 20));
}

}  // namespace
