// Options the LLM commands share (generate, perplexity, bench --llm): how the weights are
// converted at load, and the JSON flag that may stand alone or name a file.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "llm/model.h"

namespace ipex::app {

struct LlmLoadArgs {
    std::string dtype = "bf16";
    std::string woq_dtype;  // "" | int4 | int8
    int64_t group_size = 0;  // 0: not given (128 where it divides, else per channel)
    std::string lowp_mode = "auto";
    int threads = 0;

    llm::LoadOptions options() const;
};

void add_llm_load_options(CLI::App &sub, LlmLoadArgs &args);
// Exit 2 unless the counts among them (--threads) lie in their ranges; nothing is read.
void check_llm_load_args(const LlmLoadArgs &args);
// --allow-long-context, the one override of the positions a model declares (generate,
// bench --llm, perplexity); `prefix` starts the help text ("--llm: " for bench).
CLI::Option *add_allow_long_context(CLI::App &sub, bool &flag, const std::string &prefix = "");
// Loads MODEL_DIR and sets the threads (--threads, else ipex-tool's default).
std::shared_ptr<const llm::Model> load_llm(const std::string &dir, const LlmLoadArgs &args);

// Options of `bench MODEL_DIR --llm`.
struct LlmBenchArgs {
    bool enabled = false;
    int64_t input_tokens = 32, output_tokens = 32, batch = 1;
    int64_t warmup = 1;
    bool allow_long_context = false;
    double bandwidth_gbs = 0, peak_gflops = 0;
    LlmLoadArgs load;
};
void add_llm_bench_options(CLI::App &sub, LlmBenchArgs &args);
// json: "" (text), "-" (stdout) or a file.
int run_llm_bench(const std::string &dir, const LlmBenchArgs &args, int64_t iterations, const std::string &json,
                  uint64_t seed);

}  // namespace ipex::app
