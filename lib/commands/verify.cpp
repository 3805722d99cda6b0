#include "commands/verify.h"

#include <algorithm>

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

// The cosine a model with uint8 EmbeddingBag tables is held to by default (the low-precision one).
constexpr double kEmbeddingInt8MinCosine = 0.999;

// Whether optimize stored the model's EmbeddingBag tables in uint8 rows (--embedding-int8).
bool uint8_tables(const model::LoadedModel &m) {
    const auto &meta = m.metadata;
    return meta && meta->contains("embedding_int8") && (*meta)["embedding_int8"] == true;
}

}  // namespace

nlohmann::json VerifyReport::to_json() const {
    nlohmann::json j = model::diffs_to_json(diffs, tolerance, dtype);
    if (!note.empty()) j["note"] = note;
    return j;
}

std::string VerifyReport::text() const {
    return (note.empty() ? "" : "note: " + note + "\n") + model::format_diffs(diffs, tolerance);
}

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
    if (uint8_tables(a) || uint8_tables(b)) {
        report.note = "EmbeddingBag tables stored as uint8 rows (--embedding-int8): each pooled value is within "
                      "sum |w| * row range / 510 of fp32";
        report.tolerance.min_cosine = std::min(report.tolerance.min_cosine, kEmbeddingInt8MinCosine);
    }
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
