// ipex-tool calibrate MODEL (--data SPEC | --ipex-summary FILE) --out QCONFIG.json: see man ipex-tool(1), ipex-qconfig(5).
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/log.h"
#include "commands.h"
#include "commands/calibrate.h"

namespace ipex::app {
namespace {

// A one-line bar on a terminal; nothing when stderr is a pipe or --quiet.
void progress_bar(size_t done, size_t total) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / std::max<size_t>(total, 1));
    std::fprintf(stderr, "\rcalibrating [%.*s%*s] %zu/%zu", filled, "##############################",
                 kWidth - filled, "", done, total);
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
}

}  // namespace

Runner setup_calibrate(CLI::App &sub) {
    auto r = std::make_shared<commands::CalibrateRequest>();
    sub.add_option("MODEL", r->model, "TorchScript model to calibrate")->required();
    sub.add_option("--data", r->data, "calibration batches: a .pt/.npy file or a directory of them (sorted order)");
    sub.add_option("--ipex-summary", r->ipex_summary,
                   "IPEX's qconfig summary (save_qconf_summary) to convert for MODEL, in place of --data");
    sub.add_option("--out", r->out, "where to write the qconfig JSON")->required();
    sub.add_option("--recipe", r->recipe, "recipe JSON (default: the built-in recipes/int8-default.json)");
    sub.add_option("--observer", r->observer, "activation observer, overrides the recipe")
        ->check(CLI::IsMember({"min_max", "moving_average", "histogram_l2", "histogram_kl", "percentile"}));
    sub.add_option("--smooth-quant", r->smooth_quant, "SmoothQuant alpha in [0, 1] for linear layers (default: off)")
        ->check(CLI::Range(0.0, 1.0));
    sub.add_option("--max-batches", r->max_batches, "use at most N batches (0: all)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    return [r] {
        if (isatty(STDERR_FILENO) && log::level() != log::Level::quiet) r->progress = progress_bar;
        log::info(commands::run_calibrate(*r).text());
        return 0;
    };
}

}  // namespace ipex::app
