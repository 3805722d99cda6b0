// ipex-tool calibrate MODEL --data SPEC --out QCONFIG.json: see man ipex-tool(1), ipex-qconfig(5).
#include <cstdio>
#include <unistd.h>

#include "commands.h"
#include "base/atomic_file.h"
#include "base/errors.h"
#include "base/log.h"
#include "model/load.h"
#include "quant/calibrate.h"
#include "quant/qconfig.h"
#include "quant/recipe.h"

namespace ipex::app {
namespace {

struct CalibrateArgs {
    std::string model, data, out, recipe, observer;
    std::optional<double> smooth_quant;
    int64_t max_batches = 0;
};

// A one-line bar on a terminal; nothing when stderr is a pipe or --quiet.
void progress_bar(size_t done, size_t total) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / std::max<size_t>(total, 1));
    std::fprintf(stderr, "\rcalibrating [%.*s%*s] %zu/%zu", filled, "##############################",
                 kWidth - filled, "", done, total);
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
}

int run_calibrate(const CalibrateArgs &a) {
    quant::Recipe recipe = a.recipe.empty() ? quant::default_recipe() : quant::load_recipe(a.recipe);
    if (!a.observer.empty()) {
        quant::ObserverKind kind{};
        if (!quant::parse_observer_name(a.observer, kind)) throw_usage("--observer '" + a.observer + "' is unknown");
        recipe.activation_observer.kind = kind;
    }
    if (a.smooth_quant) recipe.smooth_quant_alpha = *a.smooth_quant;
    recipe.source = quant::recipe_to_json(recipe);

    const model::LoadedModel input = model::load_model(a.model);
    const std::vector<std::string> files = quant::list_batches(a.data);
    check_output_path(a.out, {a.model, a.data});

    quant::CalibrateOptions options;
    options.recipe = recipe;
    options.max_batches = a.max_batches;
    options.source = absolute_path(a.model);
    if (isatty(STDERR_FILENO) && log::level() != log::Level::quiet) options.progress = progress_bar;
    const quant::QConfig config = quant::calibrate(input.module, files, options);
    write_text_atomically(a.out, quant::qconfig_to_json(config).dump(2) + "\n");
    const size_t batches = a.max_batches > 0 ? std::min(files.size(), size_t(a.max_batches)) : files.size();
    log::info("wrote " + a.out + " (" + std::to_string(config.ops.size()) + " quantizable ops, " +
              std::to_string(batches) + " batches, observer " +
              quant::observer_name(recipe.activation_observer.kind) + ")");
    return 0;
}

}  // namespace

Runner setup_calibrate(CLI::App &sub) {
    auto a = std::make_shared<CalibrateArgs>();
    sub.add_option("MODEL", a->model, "TorchScript model to calibrate")->required();
    sub.add_option("--data", a->data, "calibration batches: a .pt/.npy file or a directory of them (sorted order)")
        ->required();
    sub.add_option("--out", a->out, "where to write the qconfig JSON")->required();
    sub.add_option("--recipe", a->recipe, "recipe JSON (default: the built-in recipes/int8-default.json)");
    sub.add_option("--observer", a->observer, "activation observer, overrides the recipe")
        ->check(CLI::IsMember({"min_max", "moving_average", "histogram_l2", "histogram_kl", "percentile"}));
    sub.add_option("--smooth-quant", a->smooth_quant, "SmoothQuant alpha in [0, 1] for linear layers (default: off)")
        ->check(CLI::Range(0.0, 1.0));
    sub.add_option("--max-batches", a->max_batches, "use at most N batches (0: all)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    return [a] { return run_calibrate(*a); };
}

}  // namespace ipex::app
