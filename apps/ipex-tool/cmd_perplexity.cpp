// ipex-tool perplexity MODEL_DIR --text FILE: a quality gate for converted/quantized models.
#include <iomanip>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/errors.h"
#include "llm/config.h"
#include "llm/generate.h"
#include "llm_options.h"

namespace ipex::app {
namespace {

constexpr size_t kMaxTextBytes = size_t(64) << 20;

struct PerplexityArgs {
    std::string model, text;
    int64_t context = 512, stride = 0;
    std::optional<double> max_ppl;
    bool json = false;
    LlmLoadArgs load;
};

int run_perplexity(const PerplexityArgs &a) {
    const std::string text = llm::read_small_file(a.text, kMaxTextBytes);
    std::vector<char32_t> check;
    if (!llm::unicode::decode_utf8(text, &check)) throw_bad_input("'" + a.text + "' is not valid UTF-8 text");
    const int64_t stride = a.stride > 0 ? a.stride : a.context / 2;
    const auto model = load_llm(a.model, a.load);
    const llm::Tokenizer tokenizer = llm::Tokenizer::load(a.model);
    const std::vector<int32_t> ids = tokenizer.encode(text, true);
    const llm::PerplexityResult r = llm::perplexity(model, ids, a.context, stride);
    const bool ok = !a.max_ppl || r.perplexity <= *a.max_ppl;
    if (a.json) {
        nlohmann::json j = {{"model", a.model},   {"weights", model->weights_description()},
                            {"text", a.text},     {"perplexity", r.perplexity},
                            {"nll_mean", r.nll / static_cast<double>(r.scored)},
                            {"tokens", r.tokens}, {"scored", r.scored},
                            {"windows", r.windows}, {"context", a.context}, {"stride", stride},
                            {"seconds", r.seconds}, {"ok", ok}};
        j["max_ppl"] = a.max_ppl ? nlohmann::json(*a.max_ppl) : nlohmann::json(nullptr);
        std::cout << j.dump(2) << "\n";
    } else {
        std::cout << std::fixed << std::setprecision(4) << "perplexity " << r.perplexity << " over " << r.scored
                  << " tokens (" << r.windows << " windows of " << a.context << ", stride " << stride << ")\n";
    }
    if (!ok)
        throw_check_failed("perplexity " + std::to_string(r.perplexity) + " is above --max-ppl " +
                           std::to_string(*a.max_ppl));
    return 0;
}

}  // namespace

Runner setup_perplexity(CLI::App &sub) {
    auto a = std::make_shared<PerplexityArgs>();
    sub.add_option("MODEL_DIR", a->model, "Hugging Face model directory")->required();
    sub.add_option("--text", a->text, "UTF-8 text file to score")->required();
    sub.add_option("--context", a->context, "tokens per window")->check(CLI::Range(2, 1 << 24))->capture_default_str();
    sub.add_option("--stride", a->stride, "tokens between window starts (default: context / 2)")->check(CLI::PositiveNumber);
    sub.add_option("--max-ppl", a->max_ppl, "exit 1 when the perplexity is above X");
    sub.add_flag("--json", a->json, "print the result as JSON");
    add_llm_load_options(sub, a->load);
    return [a] { return run_perplexity(*a); };
}

}  // namespace ipex::app
