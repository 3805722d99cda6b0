#include <iostream>

#include "commands.h"
#include "base/errors.h"
#include "core/tensor_spec.h"
#include "model/compare.h"
#include "model/inspect.h"
#include "model/load.h"

namespace ipex::app {
namespace {

struct VerifyArgs {
    std::string a, b;
    std::vector<std::string> inputs;
    uint64_t seed = 0;
    std::optional<double> min_cosine, atol, rtol;
    bool json = false;
};

// The inputs the optimized model was specialized for, when the user gave none.
std::vector<std::string> default_inputs(const model::LoadedModel &a, const model::LoadedModel &b) {
    for (const auto *m : {&b, &a}) {
        auto specs = model::recorded_sample_inputs(*m);
        if (!specs.empty()) return specs;
    }
    throw_usage("give the model inputs with --input SPEC (e.g. --input 1x3x224x224)");
}

int run_verify(const VerifyArgs &args) {
    model::LoadedModel a = model::load_model(args.a);
    model::LoadedModel b = model::load_model(args.b);
    const std::vector<std::string> specs = args.inputs.empty() ? default_inputs(a, b) : args.inputs;
    const std::vector<c10::IValue> inputs = make_inputs(specs, args.seed);

    // Tolerances follow the lower-precision side of the comparison.
    std::string dtype = model::precision_dtype(b);
    if (dtype == "fp32") dtype = model::precision_dtype(a);
    model::Tolerance tol = model::default_tolerance(dtype);
    if (args.min_cosine) tol.min_cosine = *args.min_cosine;
    tol.atol = args.atol;
    tol.rtol = args.rtol;

    a.module.eval();
    b.module.eval();
    const c10::IValue out_a = model::run_forward(a.module, clone_inputs(inputs), "'" + args.a + "'");
    const c10::IValue out_b = model::run_forward(b.module, clone_inputs(inputs), "'" + args.b + "'");
    const auto diffs = model::compare_outputs(out_a, out_b, tol);
    const nlohmann::json report = model::diffs_to_json(diffs, tol, dtype);
    if (args.json) std::cout << report.dump(2) << "\n";
    else std::cout << model::format_diffs(diffs, tol);
    if (!report["ok"].get<bool>())
        throw_check_failed("'" + args.b + "' differs from '" + args.a + "' beyond the tolerance");
    return 0;
}

}  // namespace

Runner setup_verify(CLI::App &sub) {
    auto a = std::make_shared<VerifyArgs>();
    sub.add_option("A", a->a, "reference model")->required();
    sub.add_option("B", a->b, "candidate model")->required();
    sub.add_option("--input", a->inputs, "input SPEC (repeatable); default: B's --sample-input")
        ->allow_extra_args(false);
    sub.add_option("--seed", a->seed, "seed for random inputs")->capture_default_str();
    sub.add_option("--min-cosine", a->min_cosine,
                   "minimum cosine similarity per output (default 0.99999 fp32, 0.999 bf16/fp16, 0.99 int8)")
        ->check(CLI::Range(-1.0, 1.0));
    sub.add_option("--atol", a->atol, "also require |a-b| <= atol + rtol*|a| elementwise")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--rtol", a->rtol, "relative part of the elementwise bound")->check(CLI::NonNegativeNumber);
    sub.add_flag("--json", a->json, "print the comparison as JSON");
    return [a] { return run_verify(*a); };
}

}  // namespace ipex::app
