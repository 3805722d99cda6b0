#include "commands/calibrate.h"

#include <algorithm>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "model/load.h"
#include "quant/calibrate.h"
#include "quant/qconfig.h"
#include "quant/recipe.h"

namespace ipex::commands {

std::string CalibrateReport::text() const {
    return "wrote " + out + " (" + std::to_string(ops) + " quantizable ops, " + std::to_string(batches) +
           " batches, observer " + observer + ")";
}

CalibrateReport run_calibrate(const CalibrateRequest &r) {
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
