// The options several commands take, each defined once: --threads, --json (and optimize's
// --report), the weight-only quantization options and the LLM load options.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "commands/json_output.h"
#include "commands/llm_load.h"
#include "commands/weight_only.h"

namespace ipex::app {

// --threads N: intra-op threads, checked by commands::thread_count (bench, generate,
// perplexity, info --limits). `what` starts the help text.
CLI::Option *add_threads_option(CLI::App &sub, std::optional<int> &threads,
                                const std::string &what = "intra-op threads");

// How a command takes its JSON report:
//   flag          --json: the report as JSON on stdout instead of text
//   flag_or_file  --json [FILE|-]: alone or with -, stdout; with FILE, the file (text on stderr)
//   file          NAME FILE|-: the file, or stdout with - (optimize --report)
enum class JsonForm { flag, flag_or_file, file };
CLI::Option *add_json_option(CLI::App &sub, commands::JsonOutput &output, JsonForm form, const std::string &help,
                             const std::string &name = "--json");

// How a command shows the weight-only options: the default it takes for --group-size, the
// rule of --lowp-mode auto, and for bench --llm a prefix of the help texts and the flag they need.
struct WoqOptionStyle {
    int64_t group_size_default = commands::kGroupPerChannel;
    commands::LowpAuto lowp_auto = commands::LowpAuto::bf16_model_or_cpu;
    std::string prefix;
    CLI::Option *needs = nullptr;
};
// --woq-dtype, --group-size, --lowp-mode (optimize, generate, perplexity, bench --llm).
void add_woq_options(CLI::App &sub, commands::WoqRequest &woq, const WoqOptionStyle &style);

// --dtype and the weight-only options of the LLM commands (their --threads is
// add_threads_option's); prefix and needs as above.
void add_llm_load_options(CLI::App &sub, commands::LlmLoadRequest &load, const std::string &prefix = "",
                          CLI::Option *needs = nullptr);

// --allow-long-context, the one override of the positions a model declares (generate,
// perplexity, bench --llm).
CLI::Option *add_allow_long_context(CLI::App &sub, bool &flag, const std::string &prefix = "");

}  // namespace ipex::app
