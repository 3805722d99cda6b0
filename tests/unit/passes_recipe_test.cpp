// The installed recipe recipes/optimize-levels.json documents the knob table of
// `ipex-tool optimize`; it must say exactly what the code does.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "passes/pipeline.h"

TEST(OptimizeLevelsRecipe, MatchesTheKnobTable) {
    std::ifstream in(IPEX_RECIPES_DIR "/optimize-levels.json");
    ASSERT_TRUE(in) << "missing recipe";
    const nlohmann::json recipe = nlohmann::json::parse(in);
    const auto &o1 = recipe["levels"]["O1"];
    const auto &available = recipe["available"];
    EXPECT_EQ(o1.size(), ipex::passes::knobs().size());
    EXPECT_TRUE(recipe["levels"]["O0"].empty());
    for (const auto &k : ipex::passes::knobs()) {
        ASSERT_TRUE(o1.contains(k.flag)) << k.flag;
        EXPECT_EQ(o1[k.flag].get<bool>(), k.on_at_o1) << k.flag;
        EXPECT_EQ(available[k.flag].get<bool>(), k.available) << k.flag;
        ipex::passes::OptimizeOptions o1_opts;
        EXPECT_EQ(ipex::passes::knob_enabled(k, o1_opts), k.on_at_o1) << k.flag;
        ipex::passes::OptimizeOptions o0_opts;
        o0_opts.level = "O0";
        EXPECT_FALSE(ipex::passes::knob_enabled(k, o0_opts)) << k.flag;
        o0_opts.knob_overrides[k.flag] = true;
        EXPECT_TRUE(ipex::passes::knob_enabled(k, o0_opts)) << k.flag;
    }
}
