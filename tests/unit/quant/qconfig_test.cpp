// The qconfig loader: a valid file round-trips; every bad field is exit 3 naming the op and field.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "quant/qconfig.h"
#include "quant/recipe.h"
#include "unit/test_errors.h"

namespace ipex::quant {
namespace {

using nlohmann::json;

json valid() {
    return json::parse(R"({
      "format": "ipex-qconfig", "version": 1, "model": {"identity": "00ff", "source": "m.pt"},
      "ops": [{"id": "layer.conv:conv2d:0", "module": "layer.conv", "kind": "conv2d", "dtype": "int8",
               "input": {"dtype": "u8", "scale": 0.02, "zero_point": 7,
                         "observer": {"name": "histogram_kl", "bins": 512}},
               "weight": {"dtype": "s8", "scheme": "per_channel_symmetric", "channels": 3,
                          "scales": [0.1, 0.2, 0.3]},
               "output": {"dtype": "s8", "scale": 0.5, "zero_point": 0},
               "add": {"other": {"dtype": "u8", "scale": 0.1, "zero_point": 0},
                       "output": {"dtype": "u8", "scale": 0.2, "zero_point": 1}, "relu": true}}]})");
}

// Parses a mutated copy of valid() and returns the error message (empty when accepted).
std::string error_of(const std::function<void(json &)> &mutate) {
    json j = valid();
    mutate(j);
    try {
        parse_qconfig(j.dump(), "q.json");
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::bad_input) << e.what();
        return e.what();
    }
    return "";
}

void expect_error(const std::function<void(json &)> &mutate, std::initializer_list<const char *> mentions) {
    const std::string message = error_of(mutate);
    ASSERT_FALSE(message.empty()) << "accepted";
    EXPECT_NE(message.find("q.json"), std::string::npos) << message;
    for (const char *m : mentions) EXPECT_NE(message.find(m), std::string::npos) << m << " not in: " << message;
}

TEST(QConfig, ValidRoundTrips) {
    const QConfig c = parse_qconfig(valid().dump(), "q.json");
    ASSERT_EQ(c.ops.size(), 1u);
    const OpConfig &op = c.ops[0];
    EXPECT_EQ(op.id, "layer.conv:conv2d:0");
    EXPECT_EQ(op.input.zero_point, 7);
    EXPECT_EQ(op.output.dtype, QDtype::s8);
    EXPECT_EQ(op.weight.scales.size(), 3u);
    ASSERT_TRUE(op.add.has_value());
    EXPECT_TRUE(op.add->relu);
    ASSERT_TRUE(op.input.observer.has_value());
    EXPECT_EQ(op.input.observer->kind, ObserverKind::histogram_kl);
    EXPECT_EQ(op.input.observer->bins, 512);
    const QConfig again = parse_qconfig(qconfig_to_json(c).dump(), "again.json");
    EXPECT_EQ(qconfig_to_json(again), qconfig_to_json(c));
}

TEST(QConfig, NotJsonOrWrongFormat) {
    EXPECT_EQ(testing::code_of([] { parse_qconfig("{\"format\": ", "q.json"); }), ExitCode::bad_input);
    EXPECT_EQ(testing::code_of([] { parse_qconfig("[]", "q.json"); }), ExitCode::bad_input);
    expect_error([](json &j) { j["format"] = "onnx"; }, {"format"});
    expect_error([](json &j) { j["version"] = 2; }, {"version"});
    expect_error([](json &j) { j["version"] = "1"; }, {"version", "integer"});
    expect_error([](json &j) { j["model"].erase("identity"); }, {"model.identity", "missing"});
    expect_error([](json &j) { j["ops"] = json::object(); }, {"ops", "array"});
}

TEST(QConfig, MissingFieldsNameOpAndField) {
    expect_error([](json &j) { j["ops"][0].erase("kind"); }, {"layer.conv:conv2d:0", "kind", "missing"});
    expect_error([](json &j) { j["ops"][0]["input"].erase("scale"); }, {"layer.conv:conv2d:0", "input.scale"});
    expect_error([](json &j) { j["ops"][0].erase("weight"); }, {"layer.conv:conv2d:0", "weight"});
    expect_error([](json &j) { j["ops"][0].erase("id"); }, {"ops[0]", "id"});
}

TEST(QConfig, WrongTypes) {
    expect_error([](json &j) { j["ops"][0]["input"]["scale"] = "0.1"; }, {"input.scale", "number"});
    expect_error([](json &j) { j["ops"][0]["output"]["zero_point"] = 1.5; }, {"output.zero_point", "integer"});
    expect_error([](json &j) { j["ops"][0]["weight"]["scales"] = 0.1; }, {"weight.scales", "array"});
    expect_error([](json &j) { j["ops"][0]["weight"]["scales"][1] = nullptr; }, {"weight.scales[1]"});
    expect_error([](json &j) { j["ops"][0]["dtype"] = "int4"; }, {"layer.conv:conv2d:0", "dtype"});
    expect_error([](json &j) { j["ops"][0]["kind"] = "lstm"; }, {"kind", "lstm"});
    expect_error([](json &j) { j["ops"][0]["add"]["relu"] = 1; }, {"add.relu"});
}

TEST(QConfig, ScalesMustBePositiveAndFinite) {
    for (double bad : {0.0, -0.5}) {
        expect_error([bad](json &j) { j["ops"][0]["input"]["scale"] = bad; }, {"layer.conv:conv2d:0", "input.scale", "> 0"});
        expect_error([bad](json &j) { j["ops"][0]["weight"]["scales"][2] = bad; }, {"weight.scales[2]"});
    }
    // JSON has no infinity literal; a huge exponent parses to inf.
    EXPECT_NE(error_of([](json &) {}), "x");
    json j = valid();
    std::string text = j.dump();
    const std::string key = "\"scale\":0.5";
    ASSERT_NE(text.find(key), std::string::npos);
    text.replace(text.find(key), key.size(), "\"scale\":1e999");
    try {
        parse_qconfig(text, "q.json");
        FAIL() << "accepted an infinite scale";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::bad_input);
        EXPECT_NE(std::string(e.what()).find("1e999"), std::string::npos) << e.what();
    }
}

TEST(QConfig, ZeroPointRange) {
    expect_error([](json &j) { j["ops"][0]["input"]["zero_point"] = 256; }, {"input.zero_point", "u8"});
    expect_error([](json &j) { j["ops"][0]["input"]["zero_point"] = -1; }, {"input.zero_point"});
    expect_error([](json &j) { j["ops"][0]["output"]["zero_point"] = 128; }, {"output.zero_point", "s8"});
    expect_error([](json &j) { j["ops"][0]["weight"]["zero_points"] = {0, 3, 0}; }, {"weight.zero_points[1]"});
}

TEST(QConfig, ChannelCountAndDuplicates) {
    expect_error([](json &j) { j["ops"][0]["weight"]["channels"] = 4; }, {"weight.scales", "channels"});
    expect_error([](json &j) { j["ops"][0]["weight"]["scales"] = json::array(); }, {"weight.scales"});
    expect_error([](json &j) { j["ops"].push_back(j["ops"][0]); }, {"layer.conv:conv2d:0", "twice"});
    expect_error([](json &j) { j["ops"][0]["smooth_quant"] = {{"factors", {1.0, -2.0}}}; },
                 {"smooth_quant.factors[1]"});
}

TEST(QConfig, ObserverParameters) {
    expect_error([](json &j) { j["ops"][0]["input"]["observer"]["name"] = "magic"; }, {"input.observer.name"});
    expect_error([](json &j) { j["ops"][0]["input"]["observer"]["bins"] = 3; }, {"input.observer.bins"});
    expect_error([](json &j) { j["ops"][0]["input"]["observer"]["percentile"] = 101; }, {"percentile"});
}

TEST(QConfig, LoadChecksTheFile) {
    EXPECT_EQ(testing::code_of([] { load_qconfig("/nonexistent/q.json"); }), ExitCode::bad_input);
    const std::string path = ::testing::TempDir() + "/q.json";
    std::ofstream(path) << valid().dump();
    EXPECT_EQ(load_qconfig(path).ops.size(), 1u);
}

TEST(Recipe, DefaultFileMatchesBuiltIn) {
    const Recipe file = load_recipe(std::string(IPEX_RECIPES_DIR) + "/int8-default.json");
    EXPECT_EQ(recipe_to_json(file), recipe_to_json(default_recipe()));
    const Recipe sq = load_recipe(std::string(IPEX_RECIPES_DIR) + "/int8-smoothquant.json");
    ASSERT_TRUE(sq.smooth_quant_alpha.has_value());
    EXPECT_EQ(testing::code_of([] { parse_recipe(R"({"format": "ipex-quant-recipe", "version": 1,
        "activation": {"dtype": "u4", "observer": {"name": "min_max"}}})", "r.json"); }),
              ExitCode::bad_input);
}

}  // namespace
}  // namespace ipex::quant
