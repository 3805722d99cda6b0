// Errors raised by our ops carry their class across the TorchScript interpreter: a check of
// the caller's tensors is "caller input" (exit 3), any other failure inside an op is
// internal (exit 5), and aten's or the model's own errors stay the model's (exit 3).
#include <gtest/gtest.h>
#include <ATen/core/interned_strings.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/custom_class.h>

#include "base/errors.h"
#include "core/run_errors.h"
#include "ops/linear_context.h"
#include "unit/test_errors.h"

namespace ipex::ops {
namespace {

// A graph run by the TorchScript interpreter: ipex::linear(x, ctx), or x.view(7, -1).
std::shared_ptr<torch::jit::Graph> graph_of(const std::string &fn) {
    using namespace torch::jit;
    auto g = std::make_shared<Graph>();
    Value *x = g->addInput("x")->setType(c10::TensorType::get());
    Value *y = nullptr;
    if (fn == "run_linear") {
        Value *ctx = g->addInput("ctx")->setType(c10::getCustomClassType<c10::intrusive_ptr<LinearContext>>());
        y = g->insert(c10::Symbol::fromQualString("ipex::linear"), {x, ctx});
    } else {
        y = g->insert(aten::view, {x, g->insertConstant(std::vector<int64_t>{7, -1})});
    }
    g->registerOutput(y);
    return g;
}

c10::intrusive_ptr<LinearContext> context(std::vector<std::string> post_ops) {
    std::vector<double> params(2 * post_ops.size(), 0.0);
    return c10::make_intrusive<LinearContext>(at::randn({4, 8}), c10::nullopt, "fp32",
                                              from_pickled(post_ops, params), 0);
}

// What the interpreter raises for fn(args), as the exception it is.
std::exception_ptr failure(const std::string &fn, std::vector<c10::IValue> args) {
    torch::jit::GraphFunction function(fn, graph_of(fn), nullptr);
    try {
        torch::jit::Stack stack(args.begin(), args.end());
        function.run(stack);
    } catch (...) {
        return std::current_exception();
    }
    return nullptr;
}

RunErrorKind kind_of(const std::exception_ptr &p) {
    try {
        std::rethrow_exception(p);
    } catch (const std::exception &e) {
        return classify_run_error(e);
    }
    return RunErrorKind::model;
}

ExitCode exit_code_of(const std::exception_ptr &p) {
    return ipex::testing::code_of([&] {
        try {
            std::rethrow_exception(p);
        } catch (const std::exception &e) {
            rethrow_run_error(e, "the model rejected the inputs: ", "");
        }
    });
}

std::string readable(const std::exception_ptr &p) {
    try {
        std::rethrow_exception(p);
    } catch (const std::exception &e) {
        return readable_error(e);
    }
    return "";
}

TEST(OpErrors, WrongInputShapeIsTheCallersError) {
    const auto p = failure("run_linear", {at::randn({2, 5}), context({})});
    ASSERT_TRUE(p);
    EXPECT_EQ(kind_of(p), RunErrorKind::caller_input);
    EXPECT_EQ(exit_code_of(p), ExitCode::bad_input);
    const std::string text = readable(p);
    EXPECT_NE(text.find("expected an input with 8 features"), std::string::npos) << text;
    EXPECT_EQ(text.find("[ipex:"), std::string::npos) << "tags leak into the message: " << text;
}

TEST(OpErrors, BrokenOpContractIsInternal) {
    // A context that fuses an add, called through the op that passes no second tensor.
    const auto p = failure("run_linear", {at::randn({2, 8}), context({"add"})});
    ASSERT_TRUE(p);
    EXPECT_EQ(kind_of(p), RunErrorKind::internal);
    EXPECT_EQ(exit_code_of(p), ExitCode::internal);
}

TEST(OpErrors, AtenAndModelErrorsStayTheModels) {
    const auto p = failure("run_view", {at::randn({2, 5})});
    ASSERT_TRUE(p);
    EXPECT_EQ(kind_of(p), RunErrorKind::model);
    EXPECT_EQ(exit_code_of(p), ExitCode::bad_input);
}

TEST(OpErrors, WorksWithoutTheInterpreterToo) {
    try {
        context({})->run(at::randn({3}), c10::nullopt);
        FAIL() << "a 3-feature input was accepted by a 8-feature linear";
    } catch (const c10::Error &e) {
        EXPECT_EQ(classify_run_error(e), RunErrorKind::caller_input);
    }
}

}  // namespace
}  // namespace ipex::ops
