// ipex-tool generate MODEL_DIR: text (or ids) from a Hugging Face decoder, streamed.
#include <iostream>
#include <optional>
#include <sstream>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "llm/config.h"
#include "llm/generate.h"
#include "llm_options.h"

namespace ipex::app {
namespace {

constexpr size_t kMaxPromptBytes = size_t(16) << 20;
constexpr const char *kPromptsOption = "the number of prompts (--prompt, --prompt-file, --prompt-ids and --batch-file lines)";

struct GenerateArgs {
    std::string model;
    std::vector<std::string> prompts, prompt_files, prompt_ids;
    std::string batch_file;
    int64_t max_new_tokens = 128;
    std::optional<int64_t> max_length;
    bool greedy = false;
    std::optional<double> temperature, top_p;
    std::optional<int64_t> top_k;
    uint64_t seed = 0;
    std::optional<double> repetition_penalty;
    bool no_special = false;
    bool json = false;
    bool allow_long_context = false;
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
    std::string text = read_bounded_file(path, kMaxPromptBytes, "prompt file");
    std::vector<char32_t> check;
    if (!llm::unicode::decode_utf8(text, &check))
        throw_bad_input("'" + path + "' is not valid UTF-8 text (convert it, e.g. with iconv -t UTF-8)");
    return text;
}

llm::GenerateOptions generate_options(const GenerateArgs &a) {
    llm::GenerateOptions o;
    o.max_new_tokens = a.max_new_tokens;
    if (a.max_length) llm::check_count("--max-length", *a.max_length, llm::counts::max_length);
    o.max_length = a.max_length.value_or(0);
    o.allow_long_context = a.allow_long_context;
    const bool sampling_asked = a.temperature || a.top_k || a.top_p;
    o.sampling.greedy = a.greedy || !sampling_asked;
    o.sampling.temperature = a.temperature.value_or(1.0);
    o.sampling.top_k = a.top_k.value_or(0);
    o.sampling.top_p = a.top_p.value_or(1.0);
    o.sampling.seed = a.seed;
    o.sampling.repetition_penalty = a.repetition_penalty.value_or(1.0);  // generation_config.json's once loaded
    return o;
}

int run_generate(const GenerateArgs &a) {
    // Options first, then prompts, before loading anything: usage and input errors come first.
    llm::GenerateOptions o = generate_options(a);
    llm::check_generate_options(o);
    check_llm_load_args(a.load);
    std::vector<std::string> texts = a.prompts;
    for (const auto &f : a.prompt_files) texts.push_back(read_prompt_file(f));
    if (!a.batch_file.empty()) {
        std::stringstream lines(read_prompt_file(a.batch_file));
        std::string line;
        while (std::getline(lines, line))
            if (!line.empty()) texts.push_back(line);
    }
    const int64_t count = static_cast<int64_t>(texts.size() + a.prompt_ids.size());
    if (count == 0)
        throw_usage("give a prompt: --prompt TEXT, --prompt-file FILE, --prompt-ids 1,2,3 or --batch-file FILE");
    llm::check_count(kPromptsOption, count, llm::counts::prompts);
    std::vector<std::vector<int32_t>> prompts;
    for (const auto &ids : a.prompt_ids) prompts.push_back(parse_ids(ids));

    // The config and the tokenizer, checked against each other, then the request against
    // the model's limits: all before the weights load.
    const llm::ModelConfig config = llm::read_config(a.model);
    std::unique_ptr<llm::Tokenizer> tokenizer;
    struct stat st {};
    const std::string tok_path = a.model + "/tokenizer.json";
    if (!texts.empty() || ::stat(tok_path.c_str(), &st) == 0)
        tokenizer = std::make_unique<llm::Tokenizer>(llm::load_tokenizer(a.model, config));
    for (const auto &t : texts) prompts.push_back(tokenizer->encode(t, !a.no_special));
    llm::check_generate(config, prompts, o);

    const auto model = load_llm(a.model, a.load);
    const llm::GenerationDefaults &defaults = model->generation();
    o.eos_ids = defaults.eos_token_ids;
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
                            {"stop", result.stop_reason[b]},
                            {"non_finite_logits", result.stop_reason[b] == "non_finite"}});
        double steps = 0;
        for (double v : result.step_ms) steps += v;
        // Where NaN/Inf logits first stopped a sequence (null: never).
        const llm::NonFinite &nf = result.non_finite;
        const nlohmann::json non_finite =
            nf.sequence < 0 ? nlohmann::json(nullptr)
                            : nlohmann::json{{"sequence", nf.sequence}, {"step", nf.step}, {"position", nf.position}};
        nlohmann::json j = {
            {"model", a.model},
            {"architecture", model->config().architecture},
            {"weights", model->weights_description()},
            {"sequences", seqs},
            {"non_finite_logits", non_finite},
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
    sub.add_option("--batch-file", a->batch_file,
                   "one prompt a line, generated as one batch (prompts of all kinds together: " +
                       llm::range_text(llm::counts::prompts) + ")");
    sub.add_option("--max-new-tokens", a->max_new_tokens,
                   "tokens to generate at most per sequence, " + llm::range_text(llm::counts::max_new_tokens) +
                       "; prompt + N must be within the positions the model declares")
        ->capture_default_str();
    sub.add_option("--max-length", a->max_length,
                   "tokens per sequence at most, prompt included, " + llm::range_text(llm::counts::max_length) +
                       " (default: longest prompt + --max-new-tokens); the KV cache holds the smaller of the two");
    auto *greedy = sub.add_flag("--greedy", a->greedy, "always take the most likely token (the default)");
    sub.add_option("--temperature", a->temperature, "sample with this temperature")->excludes(greedy);
    sub.add_option("--top-k", a->top_k,
                   "sample among the K most likely tokens, " + llm::range_text(llm::counts::top_k) + " (0: all)")
        ->excludes(greedy);
    sub.add_option("--top-p", a->top_p, "sample among the most likely tokens holding mass P")->excludes(greedy);
    sub.add_option("--seed", a->seed, "seed of the sampler (sequence b uses seed + b)")->capture_default_str();
    sub.add_option("--repetition-penalty", a->repetition_penalty,
                   "divide the logits of tokens already seen by R (default: generation_config.json, else 1)");
    sub.add_flag("--no-special", a->no_special, "do not add the tokenizer's BOS/special tokens to text prompts");
    sub.add_flag("--json", a->json, "print ids, text and timings as JSON instead of streaming text");
    add_allow_long_context(sub, a->allow_long_context);
    add_llm_load_options(sub, a->load);
    return [a] { return run_generate(*a); };
}

}  // namespace ipex::app
