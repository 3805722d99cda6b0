#include "commands/calibrate.h"

#include <algorithm>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "model/load.h"
#include "quant/calibrate.h"
#include "quant/ipex_summary.h"
#include "quant/qconfig.h"
#include "quant/recipe.h"

namespace ipex::commands {

std::string CalibrateReport::text() const {
    if (!ipex_summary.empty())
        return "wrote " + out + " (" + std::to_string(ops) + " quantizable ops from IPEX's summary " + ipex_summary + ")";
    return "wrote " + out + " (" + std::to_string(ops) + " quantizable ops, " + std::to_string(batches) +
           " batches, observer " + observer + ")";
}

namespace {

CalibrateReport convert_summary(const CalibrateRequest &r) {
    const model::LoadedModel input = model::load_model(r.model);
    const quant::QConfig config = quant::load_qconfig_for_model(r.ipex_summary, input.module);
    check_output_path(r.out, {r.model, r.ipex_summary});
    write_text_atomically(r.out, quant::qconfig_to_json(config).dump(2) + "\n");
    CalibrateReport report;
    report.out = r.out;
    report.ops = config.ops.size();
    report.observer = "ipex-summary";
    report.ipex_summary = r.ipex_summary;
    return report;
}

}  // namespace

CalibrateReport run_calibrate(const CalibrateRequest &r) {
    if (r.data.empty() == r.ipex_summary.empty())
        throw_usage(r.data.empty() ? "give --data SPEC (calibration batches) or --ipex-summary FILE"
                                   : "--data and --ipex-summary exclude each other: the summary already holds the scales");
    if (!r.ipex_summary.empty()) {
        if (!r.recipe.empty() || !r.observer.empty() || r.smooth_quant || r.max_batches)
            throw_usage("--ipex-summary converts the summary's scales; --recipe, --observer, --smooth-quant and "
                        "--max-batches need --data");
        return convert_summary(r);
    }
    quant::Recipe recipe = r.recipe.empty() ? quant::default_recipe() : quant::load_recipe(r.recipe);
    if (!r.observer.empty()) {
        quant::ObserverKind kind{};
        if (!quant::parse_observer_name(r.observer, kind)) throw_usage("--observer '" + r.observer + "' is unknown");
        recipe.activation_observer.kind = kind;
    }
    if (r.smooth_quant) recipe.smooth_quant_alpha = *r.smooth_quant;
    recipe.source = quant::recipe_to_json(recipe);

    const model::LoadedModel input = model::load_model(r.model);
    const std::vector<std::string> files = quant::list_batches(r.data);
    check_output_path(r.out, {r.model, r.data});

    quant::CalibrateOptions options;
    options.recipe = recipe;
    options.max_batches = r.max_batches;
    options.source = absolute_path(r.model);
    options.progress = r.progress;
    const quant::QConfig config = quant::calibrate(input.module, files, options);
    write_text_atomically(r.out, quant::qconfig_to_json(config).dump(2) + "\n");
    CalibrateReport report;
    report.out = r.out;
    report.ops = config.ops.size();
    report.batches = r.max_batches > 0 ? std::min(files.size(), size_t(r.max_batches)) : files.size();
    report.observer = quant::observer_name(recipe.activation_observer.kind);
    return report;
}

}  // namespace ipex::commands
