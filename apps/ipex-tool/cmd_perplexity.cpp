// ipex-tool perplexity MODEL_DIR --text FILE: a quality gate for converted/quantized models.
#include <cmath>
#include <iomanip>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "llm/config.h"
#include "llm/generate.h"
#include "llm_options.h"

namespace ipex::app {
namespace {

constexpr size_t kMaxTextBytes = size_t(64) << 20;

struct PerplexityArgs {
    std::string model, text;
    std::optional<int64_t> context, stride;
    std::optional<double> max_ppl;
    bool json = false;
    bool allow_long_context = false;
    LlmLoadArgs load;
};

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

int run_perplexity(const PerplexityArgs &a) {
    // Options, the text, the config and the tokenizer are checked before the weights load.
    if (a.context) llm::check_count("--context", *a.context, llm::counts::context);
    if (a.stride) llm::check_count("--stride", *a.stride, llm::counts::stride);
    if (a.max_ppl && !(*a.max_ppl > 0)) throw_usage("--max-ppl must be a number > 0, got " + std::to_string(*a.max_ppl));
    check_llm_load_args(a.load);
    const std::string text = read_bounded_file(a.text, kMaxTextBytes, "--text file");
    std::vector<char32_t> check;
    if (!llm::unicode::decode_utf8(text, &check)) throw_bad_input("'" + a.text + "' is not valid UTF-8 text");
    const llm::ModelConfig config = llm::read_config(a.model);
    const int64_t context = a.context.value_or(llm::default_context(config));
    const int64_t stride = a.stride.value_or(std::max<int64_t>(1, context / 2));
    llm::check_perplexity(config, context, stride, a.allow_long_context);
    const llm::Tokenizer tokenizer = llm::load_tokenizer(a.model, config);
    const std::vector<int32_t> ids = tokenizer.encode(text, true);
    const auto model = load_llm(a.model, a.load);
    const llm::PerplexityResult r = llm::perplexity(model, ids, context, stride, a.allow_long_context);
    const bool ok = r.finite && (!a.max_ppl || r.perplexity <= *a.max_ppl);
    const double nll_mean = r.scored > 0 ? r.nll / static_cast<double>(r.scored) : std::nan("");
    // What made the perplexity meaningless, for the text output and the error.
    const std::string why = r.non_finite_position >= 0
                                ? "NaN/Inf loss at token " + std::to_string(r.non_finite_position) + " of the text"
                                : "it overflows";
    if (a.json) {
        // JSON has no NaN: a perplexity that is not finite is null, with "finite": false.
        nlohmann::json j = {{"model", a.model},   {"weights", model->weights_description()},
                            {"text", a.text},     {"perplexity", number_or_null(r.perplexity)},
                            {"finite", r.finite}, {"nll_mean", number_or_null(nll_mean)},
                            {"tokens", r.tokens}, {"scored", r.scored},
                            {"windows", r.windows}, {"context", context}, {"stride", stride},
                            {"seconds", r.seconds}, {"ok", ok}};
        j["non_finite_position"] = r.non_finite_position >= 0 ? nlohmann::json(r.non_finite_position) : nlohmann::json(nullptr);
        j["max_ppl"] = a.max_ppl ? nlohmann::json(*a.max_ppl) : nlohmann::json(nullptr);
        std::cout << j.dump(2) << "\n";
    } else if (r.finite) {
        std::cout << std::fixed << std::setprecision(4) << "perplexity " << r.perplexity << " over " << r.scored
                  << " tokens (" << r.windows << " windows of " << context << ", stride " << stride << ")\n";
    } else {
        std::cout << "perplexity not finite (" << why << "; " << r.scored << " tokens scored before)\n";
    }
    if (!r.finite)
        throw_check_failed("the perplexity is not finite (" + why +
                           "): the checkpoint's weights or the model's arithmetic produced NaN/Inf");
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
    sub.add_option("--context", a->context,
                   "tokens per window, " + llm::range_text(llm::counts::context) + ", within the positions the model "
                   "declares (default: " + std::to_string(llm::kDefaultContext) + ", or what the model declares when less)");
    sub.add_option("--stride", a->stride, "tokens between window starts, 1 to --context (default: context / 2)");
    sub.add_option("--max-ppl", a->max_ppl,
                   "exit 1 when the perplexity is above X (a perplexity that is not finite always exits 1)");
    sub.add_flag("--json", a->json, "print the result as JSON");
    add_allow_long_context(sub, a->allow_long_context);
    add_llm_load_options(sub, a->load);
    return [a] { return run_perplexity(*a); };
}

}  // namespace ipex::app
