// ipex-tool generate MODEL_DIR: text (or ids) from a Hugging Face decoder, streamed.
#include <iostream>

#include "commands.h"
#include "commands/generate.h"
#include "llm/limits.h"
#include "options.h"

namespace ipex::app {

Runner setup_generate(CLI::App &sub) {
    auto r = std::make_shared<commands::GenerateRequest>();
    auto json = std::make_shared<commands::JsonOutput>();
    sub.add_option("MODEL_DIR", r->model, "Hugging Face model directory (config.json, safetensors, tokenizer.json)")
        ->required();
    sub.add_option("--prompt", r->prompts, "prompt text (repeatable: one sequence each)");
    sub.add_option("--prompt-file", r->prompt_files, "prompt read from a UTF-8 file (repeatable)");
    sub.add_option("--prompt-ids", r->prompt_ids, "prompt as token ids, 1,2,3 (repeatable; no tokenizer needed)");
    sub.add_option("--batch-file", r->batch_file,
                   "one prompt a line, generated as one batch (prompts of all kinds together: " +
                       llm::range_text(llm::counts::prompts) + ")");
    sub.add_option("--max-new-tokens", r->max_new_tokens,
                   "tokens to generate at most per sequence, " + llm::range_text(llm::counts::max_new_tokens) +
                       "; prompt + N must be within the positions the model declares")
        ->capture_default_str();
    sub.add_option("--max-length", r->max_length,
                   "tokens per sequence at most, prompt included, " + llm::range_text(llm::counts::max_length) +
                       " (default: longest prompt + --max-new-tokens); the KV cache holds the smaller of the two");
    auto *greedy = sub.add_flag("--greedy", r->greedy, "always take the most likely token (the default)");
    sub.add_option("--temperature", r->temperature, "sample with this temperature")->excludes(greedy);
    sub.add_option("--top-k", r->top_k,
                   "sample among the K most likely tokens, " + llm::range_text(llm::counts::top_k) + " (0: all)")
        ->excludes(greedy);
    sub.add_option("--top-p", r->top_p, "sample among the most likely tokens holding mass P")->excludes(greedy);
    sub.add_option("--seed", r->seed, "seed of the sampler (sequence b uses seed + b)")->capture_default_str();
    sub.add_option("--repetition-penalty", r->repetition_penalty,
                   "divide the logits of tokens already seen by R (default: generation_config.json, else 1)");
    sub.add_flag("--no-special", r->no_special, "do not add the tokenizer's BOS/special tokens to text prompts");
    sub.add_option("--logits", r->logits_file,
                   "write the logits each generated token was picked from to FILE.npy: float32 [prompts, steps, "
                   "vocab], the model's output before --repetition-penalty, temperature and top-k/top-p (rows "
                   "past a sequence's end are NaN)");
    add_json_option(sub, *json, JsonForm::flag, "print ids, text and timings as JSON instead of streaming text");
    add_allow_long_context(sub, r->allow_long_context);
    add_llm_load_options(sub, r->load);
    add_threads_option(sub, r->load.threads);
    return [r, json] {
        r->stream = !json->wanted();
        const auto report = commands::run_generate(*r, [](const std::string &text) { std::cout << text << std::flush; });
        commands::emit(*json, report);
        return 0;
    };
}

}  // namespace ipex::app
