// The subcommand table of ipex-tool: each entry adds its options to a CLI11
// subcommand and returns the function that runs it (an exit code).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace ipex::app {

using Runner = std::function<int()>;

struct Command {
    const char *name;
    const char *summary;
    Runner (*setup)(CLI::App &sub);
};

const std::vector<Command> &commands();

Runner setup_info(CLI::App &sub);
Runner setup_inspect(CLI::App &sub);
Runner setup_optimize(CLI::App &sub);
Runner setup_verify(CLI::App &sub);
Runner setup_bench(CLI::App &sub);
Runner setup_calibrate(CLI::App &sub);
Runner setup_calibrate_llm(CLI::App &sub);
Runner setup_quantize(CLI::App &sub);
Runner setup_import(CLI::App &sub);
Runner setup_generate(CLI::App &sub);
Runner setup_perplexity(CLI::App &sub);

// Options every subcommand takes: --quiet, --verbose.
void add_common_options(CLI::App &sub);

}  // namespace ipex::app
