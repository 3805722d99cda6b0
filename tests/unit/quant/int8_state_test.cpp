// A saved int8 op is untrusted input: every field of its state is checked before use, the
// same way as a float convolution's (ops/state_checks), and a damaged field is a c10::Error
// naming it, never a division by zero or an out-of-bounds read.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "base/errors.h"
#include "ops/conv_context.h"
#include "ops/int8/int8_context.h"

namespace ipex::quant {
namespace {

// State of a valid conv2d 8->4, k3, stride 1, pad 1 (ints: groups, in_zp, out_zp, relu, sum,
// other_zp, sum_relu, sum_in_place, n, stride[n], padding[n], dilation[n]).
Int8Context::State conv_state() {
    at::manual_seed(0);
    const at::Tensor w = at::randn({4, 8, 3, 3});
    std::vector<double> scales(4, 0.01);
    std::vector<int64_t> ints = {1, 0, 128, 0, 0, 0, 0, 0, 2, 1, 1, 1, 1, 1, 1};
    return {Int8Context::kStateVersion, w, at::randn({4}), scales, "conv2d", ints, {0.02, 0.05, 1.0},
            {static_cast<int64_t>(at::kQUInt8), static_cast<int64_t>(at::kQUInt8), static_cast<int64_t>(at::kQUInt8)}};
}

Int8Context::State linear_state() {
    at::manual_seed(0);
    std::vector<int64_t> ints = {1, 0, 0, 0, 0, 0, 0, 0, 0};
    return {Int8Context::kStateVersion, at::randn({6, 5}), c10::nullopt, std::vector<double>(6, 0.01), "linear", ints,
            {0.02, 0.05, 1.0},
            {static_cast<int64_t>(at::kQInt8), static_cast<int64_t>(at::kQUInt8), static_cast<int64_t>(at::kQUInt8)}};
}

// from_state on the mutated state throws a c10::Error whose message names `field`.
void expect_rejected(Int8Context::State state, const std::function<void(Int8Context::State &)> &mutate,
                     const std::string &field) {
    mutate(state);
    try {
        Int8Context::from_state(state);
        ADD_FAILURE() << "a state with a damaged " << field << " was accepted";
    } catch (const c10::Error &e) {
        EXPECT_NE(std::string(e.what_without_backtrace()).find(field), std::string::npos)
            << e.what_without_backtrace();
    }
}

TEST(Int8State, ValidStatesLoadAndRun) {
    auto conv = Int8Context::from_state(conv_state());
    const at::Tensor x = at::quantize_per_tensor(at::rand({1, 8, 5, 5}), 0.02, 0, at::kQUInt8);
    EXPECT_EQ(conv->run(x, c10::nullopt).sizes(), at::IntArrayRef({1, 4, 5, 5}));
    auto lin = Int8Context::from_state(linear_state());
    const at::Tensor y = at::quantize_per_tensor(at::randn({3, 5}), 0.02, 0, at::kQInt8);
    EXPECT_EQ(lin->run(y, c10::nullopt).sizes(), at::IntArrayRef({3, 6}));
}

TEST(Int8State, DamagedConvFieldsAreRejected) {
    using S = Int8Context::State;
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[9] = 0; }, "stride");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[10] = -1; }, "stride");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[11] = -2; }, "padding");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[13] = 0; }, "dilation");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[0] = 0; }, "groups");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[0] = -3; }, "groups");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[0] = 3; }, "groups");  // 4 channels
    // Three spatial parameters for a 2-D weight (and the list lengths kept consistent).
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s) = {1, 0, 128, 0, 0, 0, 0, 0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}; },
                    "stride");
    // The kind says 3-D, the weight is 4-D; and a weight of the wrong rank for conv2d.
    expect_rejected(conv_state(), [](S &s) { std::get<4>(s) = "conv1d"; }, "the weight is 4-D");
    expect_rejected(conv_state(), [](S &s) { std::get<1>(s) = at::randn({4, 8, 3}); }, "the weight is 3-D");
    expect_rejected(conv_state(), [](S &s) { std::get<1>(s) = at::randn({4, 8, 0, 3}); }, "empty dimension");
    expect_rejected(conv_state(), [](S &s) { std::get<4>(s) = "conv4d"; }, "unknown kind");
}

TEST(Int8State, DamagedQuantizationFieldsAreRejected) {
    using S = Int8Context::State;
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    expect_rejected(conv_state(), [](S &s) { std::get<6>(s)[0] = -0.5; }, "input scale");
    expect_rejected(conv_state(), [=](S &s) { std::get<6>(s)[0] = nan; }, "input scale");
    expect_rejected(conv_state(), [=](S &s) { std::get<6>(s)[1] = inf; }, "output scale");
    expect_rejected(conv_state(), [](S &s) { std::get<6>(s)[1] = 0.0; }, "output scale");
    expect_rejected(conv_state(), [=](S &s) { std::get<3>(s)[2] = nan; }, "weight scales[2]");
    expect_rejected(conv_state(), [](S &s) { std::get<3>(s)[1] = -1.0; }, "weight scales[1]");
    expect_rejected(conv_state(), [](S &s) { std::get<3>(s).pop_back(); }, "weight scales");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[1] = 256; }, "input zero point");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[2] = -1; }, "output zero point");
    expect_rejected(linear_state(), [](S &s) { std::get<5>(s)[1] = 128; }, "input zero point");  // s8
    expect_rejected(conv_state(), [](S &s) { std::get<2>(s) = at::randn({5}); }, "bias");
    // A fused add's own parameters are checked when there is one.
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[4] = 1; std::get<6>(s)[2] = -1.0; }, "add operand scale");
    expect_rejected(conv_state(), [](S &s) { std::get<5>(s)[4] = 1; std::get<5>(s)[5] = 300; }, "add operand zero point");
    expect_rejected(conv_state(), [](S &s) { std::get<7>(s)[0] = 99; }, "activation dtype");
}

TEST(Int8State, DamagedLinearFieldsAreRejected) {
    using S = Int8Context::State;
    expect_rejected(linear_state(), [](S &s) { std::get<1>(s) = at::randn({6, 5, 1}); }, "2-D");
    expect_rejected(linear_state(), [](S &s) { std::get<5>(s)[0] = 2; }, "groups");
    expect_rejected(linear_state(), [](S &s) { std::get<5>(s) = {1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1}; }, "stride");
}

// The float convolution and the int8 one reject the same geometry with the same words.
TEST(Int8State, ConvAndInt8ContextsShareTheirChecks) {
    const at::Tensor w = at::randn({4, 8, 3, 3});
    for (int64_t stride : {0, -1}) {
        std::string float_msg, int8_msg;
        try {
            ops::ConvolutionContext(w, c10::nullopt, ops::ConvParams{{stride, 1}, {1, 1}, {1, 1}, {}, 1, false}, "fp32",
                                    {}, false, {});
        } catch (const c10::Error &e) {
            float_msg = e.what_without_backtrace();
        }
        auto state = conv_state();
        std::get<5>(state)[9] = stride;
        try {
            Int8Context::from_state(state);
        } catch (const c10::Error &e) {
            int8_msg = e.what_without_backtrace();
        }
        const std::string expected = "stride value " + std::to_string(stride) + " is below 1";
        EXPECT_NE(float_msg.find(expected), std::string::npos) << float_msg;
        EXPECT_NE(int8_msg.find(expected), std::string::npos) << int8_msg;
    }
}

}  // namespace
}  // namespace ipex::quant
