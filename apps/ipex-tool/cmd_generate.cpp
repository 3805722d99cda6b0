// ipex-tool generate MODEL_DIR: text (or ids) from a Hugging Face decoder, streamed.
#include <iostream>
#include <optional>
#include <sstream>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/errors.h"
#include "llm/config.h"
#include "llm/generate.h"
#include "llm_options.h"

namespace ipex::app {
namespace {

constexpr size_t kMaxPromptBytes = size_t(16) << 20;

struct GenerateArgs {
    std::string model;
    std::vector<std::string> prompts, prompt_files, prompt_ids;
    std::string batch_file;
    int64_t max_new_tokens = 128;
    int64_t max_length = 0;
    bool greedy = false;
    std::optional<double> temperature, top_p;
    std::optional<int64_t> top_k;
    uint64_t seed = 0;
    std::optional<double> repetition_penalty;
    bool no_special = false;
    bool json = false;
    LlmLoadArgs load;
};

std::vector<int32_t> parse_ids(const std::string &text) {
    std::vector<int32_t> ids;
    std::stringstream s(text);
    std::string item;
    while (std::getline(s, item, ',')) {
        try {
            size_t used = 0;
            const long long v = std::stoll(item, &used);
            if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
            ids.push_back(static_cast<int32_t>(v));
        } catch (const std::exception &) {
            throw_usage("--prompt-ids: '" + item + "' is not a token id (expected e.g. 1,2,3)");
        }
    }
    if (ids.empty()) throw_usage("--prompt-ids is empty");
    return ids;
}

std::string read_prompt_file(const std::string &path) {
    std::string text = llm::read_small_file(path, kMaxPromptBytes);
    std::vector<char32_t> check;
    if (!llm::unicode::decode_utf8(text, &check))
        throw_bad_input("'" + path + "' is not valid UTF-8 text (convert it, e.g. with iconv -t UTF-8)");
    return text;
}

int run_generate(const GenerateArgs &a) {
    // Gather prompts before loading anything: usage and input errors come first.
    std::vector<std::string> texts = a.prompts;
    for (const auto &f : a.prompt_files) texts.push_back(read_prompt_file(f));
    if (!a.batch_file.empty()) {
        std::stringstream lines(read_prompt_file(a.batch_file));
        std::string line;
        while (std::getline(lines, line))
            if (!line.empty()) texts.push_back(line);
    }
    if (texts.empty() && a.prompt_ids.empty())
        throw_usage("give a prompt: --prompt TEXT, --prompt-file FILE, --prompt-ids 1,2,3 or --batch-file FILE");
    std::vector<std::vector<int32_t>> prompts;
    for (const auto &ids : a.prompt_ids) prompts.push_back(parse_ids(ids));

    const auto model = load_llm(a.model, a.load);
    std::unique_ptr<llm::Tokenizer> tokenizer;
    struct stat st {};
    const std::string tok_path = a.model + "/tokenizer.json";
    if (!texts.empty() || ::stat(tok_path.c_str(), &st) == 0)
        tokenizer = std::make_unique<llm::Tokenizer>(llm::Tokenizer::load(a.model));
    for (const auto &t : texts) prompts.push_back(tokenizer->encode(t, !a.no_special));

    const llm::GenerationDefaults &defaults = model->generation();
    llm::GenerateOptions o;
    o.max_new_tokens = a.max_new_tokens;
    o.max_length = a.max_length;
    o.eos_ids = defaults.eos_token_ids;
    const bool sampling_asked = a.temperature || a.top_k || a.top_p;
    o.sampling.greedy = a.greedy || !sampling_asked;
    o.sampling.temperature = a.temperature.value_or(1.0);
    o.sampling.top_k = a.top_k.value_or(0);
    o.sampling.top_p = a.top_p.value_or(1.0);
    o.sampling.seed = a.seed;
    o.sampling.repetition_penalty = a.repetition_penalty.value_or(defaults.repetition_penalty);
    const bool stream = !a.json && prompts.size() == 1 && tokenizer;
    const auto result = llm::generate(model, tokenizer.get(), prompts, o, [&](int64_t, const std::string &text) {
        if (stream) std::cout << text << std::flush;
    });
    if (a.json) {
        nlohmann::json seqs = nlohmann::json::array();
        for (size_t b = 0; b < prompts.size(); ++b)
            seqs.push_back({{"prompt_ids", result.prompt_ids[b]},
                            {"ids", result.ids[b]},
                            {"text", tokenizer ? nlohmann::json(result.text[b]) : nlohmann::json(nullptr)},
                            {"stop", result.stop_reason[b]}});
        double steps = 0;
        for (double v : result.step_ms) steps += v;
        nlohmann::json j = {
            {"model", a.model},
            {"architecture", model->config().architecture},
            {"weights", model->weights_description()},
            {"sequences", seqs},
            {"timings", {{"first_token_ms", result.prefill_ms},
                         {"next_token_ms_mean", result.step_ms.empty() ? 0.0 : steps / static_cast<double>(result.step_ms.size())},
                         {"next_token_ms", result.step_ms},
                         {"total_ms", result.total_ms}}},
        };
        std::cout << j.dump(2) << "\n";
    } else if (stream) {
        std::cout << "\n";
    } else {
        for (size_t b = 0; b < prompts.size(); ++b) {
            if (tokenizer) {
                std::cout << result.text[b] << "\n";
            } else {
                for (size_t i = 0; i < result.ids[b].size(); ++i) std::cout << (i ? "," : "") << result.ids[b][i];
                std::cout << "\n";
            }
        }
    }
    return 0;
}

}  // namespace

Runner setup_generate(CLI::App &sub) {
    auto a = std::make_shared<GenerateArgs>();
    sub.add_option("MODEL_DIR", a->model, "Hugging Face model directory (config.json, safetensors, tokenizer.json)")
        ->required();
    sub.add_option("--prompt", a->prompts, "prompt text (repeatable: one sequence each)");
    sub.add_option("--prompt-file", a->prompt_files, "prompt read from a UTF-8 file (repeatable)");
    sub.add_option("--prompt-ids", a->prompt_ids, "prompt as token ids, 1,2,3 (repeatable; no tokenizer needed)");
    sub.add_option("--batch-file", a->batch_file, "one prompt a line, generated as one batch");
    sub.add_option("--max-new-tokens", a->max_new_tokens, "tokens to generate at most per sequence")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    sub.add_option("--max-length", a->max_length,
                   "KV cache positions per sequence, prompt included (default: longest prompt + --max-new-tokens)")
        ->check(CLI::PositiveNumber);
    auto *greedy = sub.add_flag("--greedy", a->greedy, "always take the most likely token (the default)");
    sub.add_option("--temperature", a->temperature, "sample with this temperature")->excludes(greedy);
    sub.add_option("--top-k", a->top_k, "sample among the K most likely tokens")->excludes(greedy);
    sub.add_option("--top-p", a->top_p, "sample among the most likely tokens holding mass P")->excludes(greedy);
    sub.add_option("--seed", a->seed, "seed of the sampler (sequence b uses seed + b)")->capture_default_str();
    sub.add_option("--repetition-penalty", a->repetition_penalty,
                   "divide the logits of tokens already seen by R (default: generation_config.json, else 1)");
    sub.add_flag("--no-special", a->no_special, "do not add the tokenizer's BOS/special tokens to text prompts");
    sub.add_flag("--json", a->json, "print ids, text and timings as JSON instead of streaming text");
    add_llm_load_options(sub, a->load);
    return [a] { return run_generate(*a); };
}

}  // namespace ipex::app
