#include "commands/verify.h"

#include "base/errors.h"
#include "core/tensor_spec.h"
#include "model/inspect.h"
#include "model/load.h"

namespace ipex::commands {
namespace {

// The inputs the optimized model was specialized for, when the user gave none.
std::vector<std::string> default_inputs(const model::LoadedModel &a, const model::LoadedModel &b) {
    for (const auto *m : {&b, &a}) {
        auto specs = model::recorded_sample_inputs(*m);
        if (!specs.empty()) return specs;
    }
    throw_usage("give the model inputs with --input SPEC (e.g. --input 1x3x224x224)");
}

}  // namespace

nlohmann::json VerifyReport::to_json() const { return model::diffs_to_json(diffs, tolerance, dtype); }

std::string VerifyReport::text() const { return model::format_diffs(diffs, tolerance); }

bool VerifyReport::ok() const { return to_json()["ok"].get<bool>(); }

void VerifyReport::check() const {
    if (!ok()) throw_check_failed("'" + b + "' differs from '" + a + "' beyond the tolerance");
}

VerifyReport run_verify(const VerifyRequest &r) {
    model::LoadedModel a = model::load_model(r.a);
    model::LoadedModel b = model::load_model(r.b);
    const std::vector<std::string> specs = r.inputs.empty() ? default_inputs(a, b) : r.inputs;
    const std::vector<c10::IValue> inputs = make_inputs(specs, r.seed);

    VerifyReport report;
    report.a = r.a;
    report.b = r.b;
    // Tolerances follow the lower-precision side of the comparison.
    report.dtype = model::precision_dtype(b);
    if (report.dtype == "fp32") report.dtype = model::precision_dtype(a);
    report.tolerance = model::default_tolerance(report.dtype);
    if (r.min_cosine) report.tolerance.min_cosine = *r.min_cosine;
    report.tolerance.atol = r.atol;
    report.tolerance.rtol = r.rtol;

    a.module.eval();
    b.module.eval();
    const c10::IValue out_a = model::run_forward(a.module, clone_inputs(inputs), "'" + r.a + "'");
    const c10::IValue out_b = model::run_forward(b.module, clone_inputs(inputs), "'" + r.b + "'");
    report.diffs = model::compare_outputs(out_a, out_b, report.tolerance);
    return report;
}

}  // namespace ipex::commands
