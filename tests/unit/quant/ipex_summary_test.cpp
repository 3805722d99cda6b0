// IPEX's qconfig summary read as a qconfig: entries matched to the model's ops by module path,
// kind and order; output parameters found through tensor ids; what cannot be matched or read
// is exit 3 naming the entry.
#include <gtest/gtest.h>

#include <string>

#include "pass_test_utils.h"
#include "quant/ipex_summary.h"
#include "unit/test_errors.h"

namespace ipex::quant {
namespace {

using nlohmann::json;
namespace t = passes::testing;

// conv (4 -> 8), a mean, then fc (8 -> 8) called twice: ops conv:conv2d:0, fc:linear:0 and :1.
PreparedModel prepared_model() {
    auto model = t::make_module("ConvFc",
                                "def forward(self, x):\n"
                                "    y = self.conv.forward(x).mean([2, 3])\n"
                                "    return self.fc.forward(self.fc.forward(y))\n",
                                {}, {{"conv", t::conv_module({"conv2d", 4, 8, 3, 1, 1, 1, true})},
                                     {"fc", t::linear_module(8, 8)}});
    model.eval();
    return prepare_for_quantization(model);
}

json tensor(int id, double scale, int zero_point, const char *dtype = "torch.quint8") {
    return {{"id", id}, {"orig_dtype", "torch.float32"}, {"inf_dtype", dtype}, {"force_dtype", dtype},
            {"scale", {scale}}, {"zero_point", {zero_point}}};
}

json float_tensor(int id) { return {{"id", id}, {"orig_dtype", "torch.float32"}, {"inf_dtype", "torch.float32"}}; }

json op(const std::string &type, const std::string &fqn, json input, json output, json weight_scales) {
    return {{"op_type", type}, {"fqn", fqn}, {"input_tensor_infos", {input}}, {"output_tensor_infos", {output}},
            {"weight_tensor_infos",
             {{{"orig_dtype", "torch.float32"}, {"inf_dtype", "torch.qint8"}, {"scale", weight_scales},
               {"zero_point", json::array({0})}}}}};
}

json summary() {
    const json per_channel = std::vector<double>(8, 0.02);
    json ops = {
        {"0", op("<class 'torch.nn.modules.conv.Conv2d'>", "conv", tensor(0, 0.05, 128), float_tensor(1), per_channel)},
        {"1", op("<class 'torch.nn.modules.linear.Linear'>", "fc", tensor(2, 0.03, 100), float_tensor(3), per_channel)},
        {"2", op("<built-in function linear>", "fc", tensor(3, 0.07, 0, "torch.qint8"), float_tensor(4),
                 json::array({0.01}))},
    };
    ops["0"]["weight_tensor_infos"][0]["zero_point"] = std::vector<int>(8, 0);
    ops["1"]["weight_tensor_infos"][0]["zero_point"] = std::vector<int>(8, 0);
    return {{" ", {{"q_op_infos", ops}, {"nonq_op_infos", json::object()}, {"layer_output_infos", json::array()}}}};
}

TEST(IpexSummary, RecognizedByItsShape) {
    EXPECT_TRUE(is_ipex_summary(summary()));
    EXPECT_TRUE(is_ipex_summary(json::parse(R"({" ": {"q_op_infos": {}}})")));
    EXPECT_FALSE(is_ipex_summary(json::parse(R"({"format": "ipex-qconfig", "ops": []})")));
    EXPECT_FALSE(is_ipex_summary(json::object()));
    EXPECT_FALSE(is_ipex_summary(json::parse(R"({" ": {"q_op_infos": {}}, "x": 1})")));
}

// Entries take the model's ops of their module and kind in order; module classes and
// functions name the same kind; a tensor quantized where it is read next gives the writer's
// output parameters; a per-tensor weight scale is repeated per channel.
TEST(IpexSummary, MatchesByModuleKindAndOrder) {
    const PreparedModel prepared = prepared_model();
    ASSERT_EQ(prepared.ops.size(), 3u);
    const QConfig config = qconfig_from_ipex_summary(summary(), prepared, "configure.json");
    EXPECT_EQ(config.identity, prepared.identity);
    ASSERT_EQ(config.ops.size(), 3u);
    EXPECT_EQ(config.ops[0].id, "conv:conv2d:0");
    EXPECT_EQ(config.ops[1].id, "fc:linear:0");
    EXPECT_EQ(config.ops[2].id, "fc:linear:1");
    EXPECT_DOUBLE_EQ(config.ops[0].input.scale, 0.05);
    EXPECT_EQ(config.ops[0].input.zero_point, 128);
    EXPECT_DOUBLE_EQ(config.ops[1].output.scale, 0.07);  // read by the second fc as s8
    EXPECT_EQ(config.ops[1].output.dtype, QDtype::s8);
    EXPECT_EQ(config.ops[2].input.dtype, QDtype::s8);
    ASSERT_EQ(config.ops[2].weight.scales.size(), 8u);
    EXPECT_DOUBLE_EQ(config.ops[2].weight.scales[7], 0.01);
    // the mean between conv and fc is not in the summary: conv's output is bounded, never clipped
    EXPECT_GT(config.ops[0].output.scale, 0.0);
    // the converted qconfig is a valid one of ours
    EXPECT_NO_THROW(parse_qconfig(qconfig_to_json(config).dump(), "converted"));
}

TEST(IpexSummary, UnmatchedEntryIsExit3NamingIt) {
    json s = summary();
    s[" "]["q_op_infos"]["3"] = s[" "]["q_op_infos"]["2"];
    std::string message;
    EXPECT_EQ(ipex::testing::code_of([&] {
                  try {
                      qconfig_from_ipex_summary(s, prepared_model(), "configure.json");
                  } catch (const Error &e) {
                      message = e.what();
                      throw;
                  }
              }),
              ExitCode::bad_input);
    EXPECT_NE(message.find("q_op_infos['3'] (fqn 'fc', <built-in function linear>) matches no quantizable op"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("module 'fc' has 2 linear op(s)"), std::string::npos) << message;
}

TEST(IpexSummary, BadFieldsAreExit3) {
    const PreparedModel prepared = prepared_model();
    auto code = [&](const std::function<void(json &)> &mutate) {
        json s = summary();
        mutate(s);
        return ipex::testing::code_of([&] { qconfig_from_ipex_summary(s, prepared, "configure.json"); });
    };
    auto ops = [](json &s) -> json & { return s[" "]["q_op_infos"]; };
    EXPECT_EQ(code([&](json &s) { ops(s)["1"]["weight_tensor_infos"][0]["zero_point"][2] = 3; }), ExitCode::bad_input);
    EXPECT_EQ(code([&](json &s) { ops(s)["1"]["weight_tensor_infos"][0]["scale"] = {0.1, 0.2}; }), ExitCode::bad_input);
    EXPECT_EQ(code([&](json &s) { ops(s)["0"]["input_tensor_infos"][0]["zero_point"] = {300}; }), ExitCode::bad_input);
    EXPECT_EQ(code([&](json &s) { ops(s)["0"]["input_tensor_infos"][0].erase("scale"); }), ExitCode::bad_input);
    EXPECT_EQ(code([&](json &s) { ops(s)["0"]["input_tensor_infos"][0]["force_dtype"] = "torch.int32"; }),
              ExitCode::bad_input);
    EXPECT_EQ(code([&](json &s) { ops(s)["x"] = ops(s)["0"]; }), ExitCode::bad_input);
    EXPECT_EQ(code([&](json &s) { ops(s)["0"]["input_tensor_infos"][0]["force_dtype"] = "torch.float32"; }),
              ExitCode::ok);
}

}  // namespace
}  // namespace ipex::quant
