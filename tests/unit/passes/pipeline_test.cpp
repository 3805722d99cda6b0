// The optimize pipeline's one pass list: every run reports each pass once, in the list's order;
// knobs switch their passes and the level sets the defaults; the level table the build writes
// (recipes/optimize-levels.json) says what the knobs do.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "pass_test_utils.h"
#include "passes/pipeline.h"

namespace ipex::passes {
namespace {

using testing::batch_norm_module;
using testing::conv_module;
using testing::make_module;

torch::jit::Module conv_bn_relu() {
    torch::jit::Module m = make_module("ConvBnRelu", R"(
def forward(self, x):
    return torch.relu(self.bn.forward(self.conv.forward(x)))
)", {}, {{"conv", conv_module({})}, {"bn", batch_norm_module(8)}});
    m.eval();
    return m;
}

std::vector<std::string> node_kinds(const torch::jit::Module &m) {
    std::vector<std::string> kinds;
    for (const auto *node : m.get_method("forward").graph()->nodes()) kinds.push_back(node->kind().toQualString());
    return kinds;
}

std::vector<std::string> reported_names(const OptimizeResult &r) {
    std::vector<std::string> names;
    for (const auto &p : r.report["passes"]) names.push_back(p["name"].get<std::string>());
    return names;
}

const nlohmann::json &entry(const OptimizeResult &r, const std::string &name) {
    for (const auto &p : r.report["passes"])
        if (p["name"] == name) return p;
    throw std::runtime_error("no entry for " + name);
}

TEST(PassList, NamesAreUniqueAndStartWithFreeze) {
    const std::vector<std::string> names = pass_names();
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names.front(), "freeze");
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
    for (const char *name : {"fold_conv_bn", "weights_prepack", "cast_to_lowp", "chain_convolutions",
                             "replace_woq_linear", "contiguous_before_view"})
        EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
}

TEST(PassList, O0ReportsEveryPassDisabledAndKeepsTheModel) {
    OptimizeOptions o;
    o.level = "O0";
    const torch::jit::Module model = conv_bn_relu();
    const OptimizeResult r = optimize_module(model, o);
    EXPECT_EQ(reported_names(r), pass_names());
    for (const auto &p : r.report["passes"]) EXPECT_EQ(p["status"], "disabled") << p["name"];
    EXPECT_EQ(node_kinds(r.module), node_kinds(model));
}

TEST(PassList, O1ReportsEveryPassOnceInOrder) {
    for (const bool portable : {true, false}) {
        OptimizeOptions o;
        o.portable = portable;
        const OptimizeResult r = optimize_module(conv_bn_relu(), o);
        EXPECT_EQ(reported_names(r), pass_names()) << "portable " << portable;
        EXPECT_EQ(entry(r, "freeze")["status"], "applied");
        EXPECT_EQ(entry(r, "fold_conv_bn")["status"], "applied");
        EXPECT_EQ(entry(r, "fold_conv_bn")["count"], 1);
        EXPECT_EQ(entry(r, "replace_woq_linear")["status"], "disabled");  // no weight-only options
        EXPECT_EQ(entry(r, "cast_to_lowp")["status"], "disabled");        // fp32
        EXPECT_EQ(entry(r, "weights_prepack")["status"], portable ? "disabled" : "applied");
        EXPECT_EQ(entry(r, "fuse_eltwise")["status"], portable ? "disabled" : "applied");
        EXPECT_EQ(r.report["mode"], portable ? "portable" : "prepacked");
        EXPECT_EQ(testing::count(r.module.get_method("forward").graph(), "aten::batch_norm"), 0);
    }
}

// The typed list the commands read says what the JSON report says, entry by entry.
void expect_typed_equals_report(const OptimizeResult &r) {
    ASSERT_EQ(r.passes.size(), r.report["passes"].size());
    for (size_t i = 0; i < r.passes.size(); ++i) {
        const auto &j = r.report["passes"][i];
        EXPECT_EQ(r.passes[i].name, j["name"]);
        EXPECT_EQ(r.passes[i].applied, j["status"] == "applied") << r.passes[i].name;
        EXPECT_EQ(r.passes[i].count, j["count"]) << r.passes[i].name;
    }
    EXPECT_EQ(r.prepacked, r.report["mode"] == "prepacked");
}

TEST(PassList, TypedOutcomesMatchTheReport) {
    for (const bool portable : {true, false}) {
        OptimizeOptions o;
        o.portable = portable;
        o.fp32_math_mode = "bf32";
        const OptimizeResult r = optimize_module(conv_bn_relu(), o);
        expect_typed_equals_report(r);
        EXPECT_EQ(r.passes.front().name, "freeze");
        EXPECT_TRUE(r.passes.front().applied);
        // What prepacking ran in: bf32 only where it prepacked and oneDNN has it, else fp32.
        const auto &prepack = entry(r, "weights_prepack");
        EXPECT_EQ(r.fp32_math_mode, prepack.value("fp32_math_mode", std::string("fp32"))) << "portable " << portable;
        if (portable) EXPECT_EQ(r.fp32_math_mode, "fp32");
    }
    OptimizeOptions o0;
    o0.level = "O0";
    const OptimizeResult r = optimize_module(conv_bn_relu(), o0);
    expect_typed_equals_report(r);
    for (const PassOutcome &p : r.passes) EXPECT_FALSE(p.applied) << p.name;
}

TEST(PassList, AKnobSwitchesItsPassesAndWarnsWhenWhatTheyNeedIsOff) {
    OptimizeOptions o;
    o.knob_overrides["conv-bn-folding"] = false;
    OptimizeResult r = optimize_module(conv_bn_relu(), o);
    EXPECT_EQ(entry(r, "fold_conv_bn")["status"], "disabled");
    EXPECT_EQ(testing::count(r.module.get_method("forward").graph(), "aten::batch_norm"), 1);
    EXPECT_TRUE(r.warnings.empty());

    // conv-chains switches two passes; asked for on a portable model it warns once.
    OptimizeOptions chains;
    chains.knob_overrides["conv-chains"] = true;
    r = optimize_module(conv_bn_relu(), chains);
    EXPECT_EQ(entry(r, "group_convolutions")["status"], "disabled");
    EXPECT_EQ(entry(r, "chain_convolutions")["status"], "disabled");
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("--conv-chains needs the prepacked ops"), std::string::npos) << r.warnings[0];

    // At O0 an explicit knob runs its pass alone.
    OptimizeOptions o0;
    o0.level = "O0";
    o0.knob_overrides["conv-bn-folding"] = true;
    r = optimize_module(conv_bn_relu(), o0);
    EXPECT_EQ(entry(r, "freeze")["status"], "applied");
    EXPECT_EQ(entry(r, "fold_conv_bn")["status"], "applied");
    EXPECT_EQ(entry(r, "remove_dropout")["status"], "disabled");
    EXPECT_EQ(reported_names(r), pass_names());
}

TEST(LevelTable, KnobsFollowTheLevelThenTheOverride) {
    for (const Knob &k : kKnobs) {
        OptimizeOptions o1;
        EXPECT_EQ(knob_enabled(k, o1), k.on_at_o1) << k.flag;
        OptimizeOptions o0;
        o0.level = "O0";
        EXPECT_FALSE(knob_enabled(k, o0)) << k.flag;
        o0.knob_overrides[k.flag] = true;
        EXPECT_TRUE(knob_enabled(k, o0)) << k.flag;
        o1.knob_overrides[k.flag] = false;
        EXPECT_FALSE(knob_enabled(k, o1)) << k.flag;
    }
}

TEST(LevelTable, TheBuildWritesItForInstallation) {
    std::ifstream in(IPEX_LEVELS_JSON);
    ASSERT_TRUE(in) << "missing " << IPEX_LEVELS_JSON;
    const nlohmann::json written = nlohmann::json::parse(in);
    EXPECT_EQ(written, levels_json());
    EXPECT_TRUE(written["levels"]["O0"].empty());
    const auto &o1 = written["levels"]["O1"];
    EXPECT_EQ(o1.size(), std::size(kKnobs));
    EXPECT_EQ(o1["conv-bn-folding"], true);
    EXPECT_EQ(o1["auto-kernel-selection"], false);
    // every knob switches at least one pass of the list
    OptimizeOptions all_off;
    all_off.portable = false;
    for (const Knob &k : kKnobs) all_off.knob_overrides[k.flag] = false;
    const OptimizeResult r = optimize_module(conv_bn_relu(), all_off);
    for (const auto &p : r.report["passes"])
        if (p["name"] != "freeze" && p["name"] != "contiguous_before_view" && p["name"] != "replace_pooling")
            EXPECT_EQ(p["status"], "disabled") << p["name"];
}

}  // namespace
}  // namespace ipex::passes
