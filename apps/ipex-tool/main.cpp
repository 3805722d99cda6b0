// ipex-tool: parses the command line and hands off to lib/. See man ipex-tool(1).
#include <ATen/Parallel.h>

#include <iostream>
#include <map>

#include "commands.h"
#include "base/errors.h"
#include "core/run_errors.h"
#include "base/log.h"
#include "base/text.h"
#include "core/system_info.h"

namespace ipex::app {

const std::vector<Command> &commands() {
    static const std::vector<Command> table = {
        {"info", "CPU features, AMX permission, oneDNN ISA, versions, topology", setup_info},
        {"inspect", "what a TorchScript model holds and what it needs to run", setup_inspect},
        {"optimize", "optimize a TorchScript model for inference on this CPU", setup_optimize},
        {"verify", "run two models on the same inputs and compare their outputs", setup_verify},
        {"bench", "time a model, optionally side by side with a baseline", setup_bench},
        {"calibrate", "observe a model on calibration data and write an INT8 qconfig", setup_calibrate},
        {"calibrate-llm", "SmoothQuant calibration of a Hugging Face decoder: a W8A8 qconfig for --qconfig",
         setup_calibrate_llm},
        {"quantize", "convert a model to INT8 with a qconfig (or dynamic INT8 linear)", setup_quantize},
        {"import", "convert a GPTQ/AWQ checkpoint into a weight-only checkpoint", setup_import},
        {"generate", "generate text with a Hugging Face decoder (Llama, Mistral, Qwen2)", setup_generate},
        {"perplexity", "perplexity of a Hugging Face decoder over a text (a quality gate)", setup_perplexity},
    };
    return table;
}

void add_common_options(CLI::App &sub) {
    sub.add_flag_callback("-q,--quiet", [] { log::set_level(log::Level::quiet); },
                          "print nothing but results and errors");
    sub.add_flag_callback("-v,--verbose", [] { log::set_level(log::Level::verbose); },
                          "print progress details");
}

namespace {

void check_known_command(const std::string &word) {
    std::string best;
    size_t best_distance = 4;
    for (const auto &c : commands()) {
        if (word == c.name) return;
        const size_t d = edit_distance(word, c.name);
        if (d < best_distance || (std::string(c.name).rfind(word, 0) == 0 && d < 6)) {
            best_distance = d;
            best = c.name;
        }
    }
    throw_usage("unknown command '" + word + "'" +
                (best.empty() ? "" : "; did you mean '" + best + "'?") +
                " (see 'ipex-tool --help')");
}

int run(int argc, char **argv) {
    CLI::App app{"ipex-tool: make TorchScript models fast on Intel CPUs (oneDNN, AVX-512, AMX)",
                 "ipex-tool"};
    app.set_version_flag("--version", std::string("ipex-tool ") + IPEX_TOOL_VERSION);
    app.require_subcommand(1);
    app.footer("Exit codes: 0 ok, 1 check failed, 2 usage, 3 bad input file, 4 unsupported, "
               "5 internal.\nSee man ipex-tool(1).");
    if (argc > 1 && argv[1][0] != '-') check_known_command(argv[1]);

    std::map<CLI::App *, Runner> runners;
    for (const auto &c : commands()) {
        CLI::App *sub = app.add_subcommand(c.name, c.summary);
        add_common_options(*sub);
        runners[sub] = c.setup(*sub);
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        std::string where;
        for (auto *sub : app.get_subcommands()) where = std::string(" ") + sub->get_name();
        throw_usage(std::string(e.what()) + " (see 'ipex-tool" + where + " --help')");
    }
    at::set_num_threads(default_threads());  // a command's --threads overrides (commands/threads.h)
    for (auto *sub : app.get_subcommands()) return runners.at(sub)();
    return static_cast<int>(ExitCode::usage);
}

}  // namespace
}  // namespace ipex::app

int main(int argc, char **argv) { return ipex::run_guarded("ipex-tool", ipex::app::run, argc, argv, ipex::torch_error_text); }
