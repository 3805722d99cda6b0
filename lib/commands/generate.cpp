#include "commands/generate.h"

#include <ATen/ATen.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

#include "base/atomic_file.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "core/npy.h"
#include "llm/config.h"
#include "llm/gguf_tokenizer.h"
#include "llm/tensor_source.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

namespace ipex::commands {
namespace {

constexpr size_t kMaxPromptBytes = size_t(16) << 20;
constexpr const char *kPromptsOption =
    "the number of prompts (--prompt, --prompt-file, --prompt-ids and --batch-file lines)";

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

}  // namespace

llm::GenerateOptions GenerateRequest::options() const {
    llm::GenerateOptions o;
    o.max_new_tokens = max_new_tokens;
    if (max_length) llm::check_count("--max-length", *max_length, llm::counts::max_length);
    o.max_length = max_length.value_or(0);
    o.allow_long_context = allow_long_context;
    const bool sampling_asked = temperature || top_k || top_p;
    o.sampling.greedy = greedy || !sampling_asked;
    o.sampling.temperature = temperature.value_or(1.0);
    o.sampling.top_k = top_k.value_or(0);
    o.sampling.top_p = top_p.value_or(1.0);
    o.sampling.seed = seed;
    o.sampling.repetition_penalty = repetition_penalty.value_or(1.0);  // generation_config.json's once loaded
    return o;
}

nlohmann::json GenerateReport::to_json() const {
    const llm::GenerateResult &r = result;
    nlohmann::json seqs = nlohmann::json::array();
    for (size_t b = 0; b < r.ids.size(); ++b)
        seqs.push_back({{"prompt_ids", r.prompt_ids[b]},
                        {"ids", r.ids[b]},
                        {"text", tokenizer ? nlohmann::json(r.text[b]) : nlohmann::json(nullptr)},
                        {"stop", r.stop_reason[b]},
                        {"non_finite_logits", r.stop_reason[b] == "non_finite"}});
    double steps = 0;
    for (double v : r.step_ms) steps += v;
    // Where NaN/Inf logits first stopped a sequence (null: never).
    const llm::NonFinite &nf = r.non_finite;
    const nlohmann::json non_finite =
        nf.sequence < 0 ? nlohmann::json(nullptr)
                        : nlohmann::json{{"sequence", nf.sequence}, {"step", nf.step}, {"position", nf.position}};
    const double next_mean = r.step_ms.empty() ? 0.0 : steps / static_cast<double>(r.step_ms.size());
    return {
        {"model", model},
        {"architecture", architecture},
        {"weights", weights},
        {"chat_template", chat_template ? nlohmann::json(*chat_template) : nlohmann::json(nullptr)},
        {"sequences", seqs},
        {"non_finite_logits", non_finite},
        {"timings", {{"first_token_ms", r.prefill_ms},
                     {"next_token_ms_mean", next_mean},
                     {"next_token_ms", r.step_ms},
                     {"total_ms", r.total_ms}}},
        {"logits", logits_file.empty() ? nlohmann::json(nullptr)
                                       : nlohmann::json{{"file", logits_file}, {"shape", logits_shape}}},
    };
}

std::string GenerateReport::text() const {
    if (streamed) return "\n";
    std::ostringstream out;
    for (size_t b = 0; b < result.ids.size(); ++b) {
        if (tokenizer) {
            out << result.text[b] << "\n";
        } else {
            for (size_t i = 0; i < result.ids[b].size(); ++i) out << (i ? "," : "") << result.ids[b][i];
            out << "\n";
        }
    }
    return out.str();
}

namespace {

// The prompts of a request, read and counted (usage and input errors before anything loads):
// the texts to tokenize and the id lists.
std::pair<std::vector<std::string>, std::vector<std::vector<int32_t>>> read_prompts(const GenerateRequest &request) {
    std::vector<std::string> texts = request.prompts;
    for (const auto &f : request.prompt_files) texts.push_back(read_prompt_file(f));
    if (!request.batch_file.empty()) {
        std::stringstream lines(read_prompt_file(request.batch_file));
        std::string line;
        while (std::getline(lines, line))
            if (!line.empty()) texts.push_back(line);
    }
    const int64_t count = static_cast<int64_t>(texts.size() + request.prompt_ids.size());
    if (count == 0)
        throw_usage("give a prompt: --prompt TEXT, --prompt-file FILE, --prompt-ids 1,2,3 or --batch-file FILE");
    llm::check_count(kPromptsOption, count, llm::counts::prompts);
    std::vector<std::vector<int32_t>> prompts;
    for (const auto &ids : request.prompt_ids) prompts.push_back(parse_ids(ids));
    return {std::move(texts), std::move(prompts)};
}

// Largest --logits file: sequences x --max-new-tokens x vocab fp32 values.
constexpr uint64_t kMaxLogitsBytes = uint64_t(4) << 30;

// --logits: its path writable (not an input) and its size bounded, before the weights load.
void check_logits_file(const GenerateRequest &request, size_t sequences, int64_t vocab) {
    if (request.logits_file.empty()) return;
    check_output_path(request.logits_file, {request.model});
    const double bytes = static_cast<double>(sequences) * static_cast<double>(request.max_new_tokens) *
                         static_cast<double>(vocab) * 4.0;
    if (bytes > static_cast<double>(kMaxLogitsBytes))
        throw_usage("--logits would hold " + std::to_string(sequences) + " x " + std::to_string(request.max_new_tokens) +
                    " x " + std::to_string(vocab) + " fp32 values (" + std::to_string(bytes / (1 << 30)) +
                    " GiB, at most 4): lower --max-new-tokens or the number of prompts");
}

GenerateReport generate_on(const GenerateRequest &request, llm::GenerateOptions o,
                           std::vector<std::vector<int32_t>> prompts, const std::shared_ptr<const llm::Model> &model,
                           const llm::Tokenizer *tokenizer, const std::string &dir,
                           const std::function<void(const std::string &)> &on_text) {
    const llm::GenerationDefaults &defaults = model->generation();
    o.eos_ids = defaults.eos_token_ids;
    o.sampling.repetition_penalty = request.repetition_penalty.value_or(defaults.repetition_penalty);
    GenerateReport report;
    report.model = dir;
    report.chat_template = llm::chat_template(dir);
    report.architecture = model->config().architecture;
    report.weights = model->weights_description();
    report.tokenizer = tokenizer != nullptr;
    report.streamed = request.stream && prompts.size() == 1 && tokenizer;
    const int64_t vocab = model->config().vocab_size;
    // --logits: every step's row written in place into [prompts, max-new-tokens, vocab] (NaN
    // where a sequence has ended), narrowed to the longest run's steps when it is saved.
    const auto batch = static_cast<int64_t>(prompts.size());
    at::Tensor all;
    int64_t steps = 0;
    if (!request.logits_file.empty()) {
        all = at::full({batch, std::max<int64_t>(request.max_new_tokens, 0), vocab}, std::nanf(""), at::kFloat);
        o.on_logits = [&](int64_t b, int64_t step, const float *row) {  // step 1, 2, ...
            TORCH_INTERNAL_ASSERT(step >= 1 && step <= all.size(1) && b >= 0 && b < all.size(0),
                                  "generate emitted logits of step ", step, " for sequence ", b);
            std::copy(row, row + vocab, all[b][step - 1].data_ptr<float>());
            steps = std::max(steps, step);
        };
    }
    report.result = llm::generate(model, tokenizer, prompts, o, [&](int64_t, const std::string &text) {
        if (report.streamed) on_text(text);
    });
    if (!request.logits_file.empty()) {
        all = all.narrow(1, 0, steps);
        save_npy(request.logits_file, all);
        report.logits_file = request.logits_file;
        report.logits_shape = all.sizes().vec();
    }
    return report;
}

bool has_tokenizer(const std::string &dir) {
    struct stat st {};
    return ::stat((dir + "/tokenizer.json").c_str(), &st) == 0;
}

// The tokenizer for decoding when the prompts are ids: a directory's tokenizer.json, or a GGUF
// file's when its kind is one we read (another kind leaves the output without text).
std::unique_ptr<llm::Tokenizer> tokenizer_for_ids(const std::string &model, const llm::ModelConfig &config) {
    if (has_tokenizer(model)) return std::make_unique<llm::Tokenizer>(llm::load_tokenizer(model, config));
    if (!llm::is_gguf(model)) return nullptr;
    try {
        return std::make_unique<llm::Tokenizer>(llm::load_tokenizer(model, config));
    } catch (const Error &e) {
        if (e.code() != ExitCode::unsupported) throw;
        return nullptr;
    }
}

}  // namespace

GenerateReport run_generate(const GenerateRequest &request, const std::function<void(const std::string &)> &on_text) {
    // Options first, then prompts, before loading anything: usage and input errors come first.
    llm::GenerateOptions o = request.options();
    llm::check_generate_options(o);
    request.load.check();
    auto [texts, prompts] = read_prompts(request);

    // The config and the tokenizer, checked against each other, then the request against
    // the model's limits: all before the weights load.
    const llm::ModelConfig config = llm::read_config(request.model);
    std::unique_ptr<llm::Tokenizer> tokenizer;
    tokenizer = texts.empty() ? tokenizer_for_ids(request.model, config)
                              : std::make_unique<llm::Tokenizer>(llm::load_tokenizer(request.model, config));
    for (const auto &t : texts) prompts.push_back(tokenizer->encode(t, !request.no_special));
    llm::check_generate(config, prompts, o);
    check_logits_file(request, prompts.size(), config.vocab_size);

    const auto model = load_llm(request.model, request.load);
    return generate_on(request, o, std::move(prompts), model, tokenizer.get(), request.model, on_text);
}

LoadedLlm load_for_generate(const std::string &dir, const LlmLoadRequest &load) {
    load.check();
    LoadedLlm loaded;
    loaded.dir = dir;
    const llm::ModelConfig config = llm::read_config(dir);
    loaded.tokenizer = tokenizer_for_ids(dir, config);
    loaded.model = load_llm(dir, load);
    return loaded;
}

GenerateReport run_generate(const GenerateRequest &request, const LoadedLlm &loaded,
                            const std::function<void(const std::string &)> &on_text) {
    llm::GenerateOptions o = request.options();
    llm::check_generate_options(o);
    auto [texts, prompts] = read_prompts(request);
    if (!texts.empty() && !loaded.tokenizer)
        throw_usage("'" + loaded.dir + "' has no tokenizer.json: give the prompts as token ids");
    for (const auto &t : texts) prompts.push_back(loaded.tokenizer->encode(t, !request.no_special));
    llm::check_generate(loaded.model->config(), prompts, o);
    check_logits_file(request, prompts.size(), loaded.model->config().vocab_size);
    return generate_on(request, o, std::move(prompts), loaded.model, loaded.tokenizer.get(), loaded.dir, on_text);
}

}  // namespace ipex::commands
