// Side-by-side timing of an optimized model against what stock libtorch gives for the
// original: frozen fp32, and frozen autocast-bf16 with channels-last. All runners share
// one input set and are interleaved (rotating order) in one run; prints medians and the
// ratio of each baseline's median to the candidate's.
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <memory>

#include "bench/harness.h"
#include "bench/stock.h"
#include "timing_cli.h"
#include "base/errors.h"
#include "core/run_errors.h"
#include "core/system_info.h"
#include "core/tensor_spec.h"
#include "model/load.h"

namespace {

struct Args {
    std::string original, candidate, label;
    std::vector<std::string> inputs;
    std::vector<std::string> baselines{"fp32", "bf16"};
    ipex::bench::TimingCli timing{30, 5};
    bool json = false;
};

int run(int argc, char **argv) {
    Args a;
    CLI::App app{"time an optimized model against stock libtorch baselines, interleaved"};
    app.add_option("--original", a.original, "the model as the user had it")->required();
    app.add_option("--candidate", a.candidate, "the optimized model")->required();
    app.add_option("--input", a.inputs, "input SPEC (repeatable)")->required()->allow_extra_args(false);
    app.add_option("--baselines", a.baselines, "stock baselines: fp32 (frozen), bf16 (autocast, channels-last)")
        ->delimiter(',');
    a.timing.add_to(app);
    app.add_option("--label", a.label, "name printed in the result line");
    app.add_flag("--json", a.json, "print one JSON object instead of text");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    a.timing.apply_threads();
    const auto inputs = ipex::make_inputs(a.inputs, 0);
    ipex::model::LoadedModel cand = ipex::model::load_model(a.candidate);
    cand.module.eval();

    std::vector<std::string> names{"candidate"};
    std::vector<ipex::bench::RunFn> runners;
    runners.push_back([&] {
        c10::InferenceMode guard;
        cand.module.forward(inputs);
    });
    std::vector<std::unique_ptr<ipex::bench::StockRunner>> stock;
    for (const auto &dtype : a.baselines) {
        stock.push_back(std::make_unique<ipex::bench::StockRunner>(a.original, dtype, inputs));
        names.push_back(stock.back()->kind());
        auto *runner = stock.back().get();
        runners.push_back([runner] { runner->run(); });
    }
    const auto stats = ipex::bench::time_round_robin(runners, a.timing.timing());

    nlohmann::json j = {{"label", a.label}, {"inputs", ipex::describe_inputs(inputs)},
                        {"threads", at::get_num_threads()}, {"iterations", a.timing.iterations}};
    for (size_t i = 0; i < names.size(); ++i) {
        j["median_ms"][names[i]] = stats[i].median;
        if (i > 0) j["ratio"][names[i]] = stats[i].median / stats[0].median;
    }
    if (a.json) {
        std::cout << j.dump() << "\n";
        return 0;
    }
    std::cout << std::fixed << std::setprecision(2);
    std::cout << (a.label.empty() ? a.candidate : a.label) << " [" << ipex::describe_inputs(inputs) << ", "
              << at::get_num_threads() << " threads, " << a.timing.iterations << " interleaved rounds]\n";
    std::cout << "  candidate " << a.candidate << ": median " << stats[0].median << " ms\n";
    for (size_t i = 1; i < names.size(); ++i)
        std::cout << "  " << names[i] << ": median " << stats[i].median << " ms -> candidate is "
                  << stats[i].median / stats[0].median << "x faster\n";
    return 0;
}

}  // namespace

int main(int argc, char **argv) { return ipex::run_guarded("compare_stock", run, argc, argv, ipex::torch_error_text); }
