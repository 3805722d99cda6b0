// `ipex-tool generate MODEL_DIR`: text (or ids) from a Hugging Face decoder, greedy or sampled,
// one prompt streamed or a ragged batch.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands/llm_load.h"
#include "llm/generate.h"

namespace ipex::commands {

struct GenerateRequest {
    std::string model;                      // MODEL_DIR
    std::vector<std::string> prompts;       // --prompt TEXT
    std::vector<std::string> prompt_files;  // --prompt-file: UTF-8 text
    std::vector<std::string> prompt_ids;    // --prompt-ids 1,2,3 (no tokenizer needed)
    std::string batch_file;                 // --batch-file: one prompt a line
    int64_t max_new_tokens = 128;
    std::optional<int64_t> max_length;      // unset: longest prompt + max_new_tokens
    bool greedy = false;                    // also when no sampling option is given
    std::optional<double> temperature, top_p;
    std::optional<int64_t> top_k;
    uint64_t seed = 0;
    std::optional<double> repetition_penalty;  // unset: generation_config.json's, else 1
    bool no_special = false;                // no BOS/special tokens added to text prompts
    bool allow_long_context = false;
    bool stream = true;                     // one text prompt: its text goes to on_text as it comes
    // --logits FILE.npy: the logits each generated token was picked from, float32
    // [sequences, steps, vocab] (llm::GenerateOptions::on_logits; NaN rows past a sequence's end)
    std::string logits_file;
    LlmLoadRequest load;

    // The options before the model is read (exit 2 on a --max-length out of range).
    llm::GenerateOptions options() const;
};

struct GenerateReport {
    std::string model, architecture, weights;
    bool tokenizer = false;  // text prompts or a tokenizer.json: the result has text
    bool streamed = false;   // the text went to on_text as it came
    // The model's chat template as text (GGUF tokenizer.chat_template or tokenizer_config.json's),
    // reported, never applied: the prompts are used as given.
    std::optional<std::string> chat_template;
    llm::GenerateResult result;
    std::string logits_file;            // --logits, "" for none
    std::vector<int64_t> logits_shape;  // what it holds

    // {"model", "architecture", "weights", "chat_template", "sequences": [...], "non_finite_logits",
    //  "timings", "logits"}
    nlohmann::json to_json() const;
    // What follows the streamed text (a newline), else a line per sequence: its text, or its ids.
    std::string text() const;
};

// Checks the options, reads and tokenizes the prompts and checks them against the model's
// config before the weights load; then generates.
GenerateReport run_generate(const GenerateRequest &request, const std::function<void(const std::string &)> &on_text);

// A model loaded once for many generate calls (the Python front end's handles): the weights
// as request.load asks, and the tokenizer when the directory has one.
struct LoadedLlm {
    std::string dir;
    std::shared_ptr<const llm::Model> model;
    std::shared_ptr<const llm::Tokenizer> tokenizer;  // null without tokenizer.json
};
LoadedLlm load_for_generate(const std::string &dir, const LlmLoadRequest &load);
// run_generate on a loaded model: request.model and request.load are not read.
GenerateReport run_generate(const GenerateRequest &request, const LoadedLlm &loaded,
                            const std::function<void(const std::string &)> &on_text);

}  // namespace ipex::commands
