#include "commands/perplexity.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "base/bounded_file.h"
#include "base/errors.h"
#include "llm/config.h"
#include "llm/unicode.h"

namespace ipex::commands {
namespace {

constexpr size_t kMaxTextBytes = size_t(64) << 20;

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// What made the perplexity meaningless, for the text and the error.
std::string why_not_finite(const llm::PerplexityResult &r) {
    return r.non_finite_position >= 0
               ? "NaN/Inf loss at token " + std::to_string(r.non_finite_position) + " of the text"
               : "it overflows";
}

}  // namespace

bool PerplexityReport::ok() const { return result.finite && (!max_ppl || result.perplexity <= *max_ppl); }

nlohmann::json PerplexityReport::to_json() const {
    const llm::PerplexityResult &r = result;
    const double nll_mean = r.scored > 0 ? r.nll / static_cast<double>(r.scored) : std::nan("");
    nlohmann::json j = {{"model", model},     {"weights", weights},
                        {"text", text_file},  {"perplexity", number_or_null(r.perplexity)},
                        {"finite", r.finite}, {"nll_mean", number_or_null(nll_mean)},
                        {"tokens", r.tokens}, {"scored", r.scored},
                        {"windows", r.windows}, {"context", context}, {"stride", stride},
                        {"seconds", r.seconds}, {"ok", ok()}};
    j["non_finite_position"] = r.non_finite_position >= 0 ? nlohmann::json(r.non_finite_position) : nlohmann::json(nullptr);
    j["max_ppl"] = max_ppl ? nlohmann::json(*max_ppl) : nlohmann::json(nullptr);
    return j;
}

std::string PerplexityReport::text() const {
    const llm::PerplexityResult &r = result;
    std::ostringstream out;
    if (r.finite)
        out << std::fixed << std::setprecision(4) << "perplexity " << r.perplexity << " over " << r.scored
            << " tokens (" << r.windows << " windows of " << context << ", stride " << stride << ")\n";
    else
        out << "perplexity not finite (" << why_not_finite(r) << "; " << r.scored << " tokens scored before)\n";
    return out.str();
}

void PerplexityReport::check() const {
    if (!result.finite)
        throw_check_failed("the perplexity is not finite (" + why_not_finite(result) +
                           "): the checkpoint's weights or the model's arithmetic produced NaN/Inf");
    if (!ok())
        throw_check_failed("perplexity " + std::to_string(result.perplexity) + " is above --max-ppl " +
                           std::to_string(*max_ppl));
}

PerplexityReport run_perplexity(const PerplexityRequest &request) {
    // Options, the text, the config and the tokenizer are checked before the weights load.
    if (request.context) llm::check_count("--context", *request.context, llm::counts::context);
    if (request.stride) llm::check_count("--stride", *request.stride, llm::counts::stride);
    if (request.max_ppl && !(*request.max_ppl > 0))
        throw_usage("--max-ppl must be a number > 0, got " + std::to_string(*request.max_ppl));
    request.load.check();
    const std::string text = read_bounded_file(request.text, kMaxTextBytes, "--text file");
    std::vector<char32_t> check;
    if (!llm::unicode::decode_utf8(text, &check)) throw_bad_input("'" + request.text + "' is not valid UTF-8 text");
    const llm::ModelConfig config = llm::read_config(request.model);
    PerplexityReport report;
    report.model = request.model;
    report.text_file = request.text;
    report.max_ppl = request.max_ppl;
    report.context = request.context.value_or(llm::default_context(config));
    report.stride = request.stride.value_or(std::max<int64_t>(1, report.context / 2));
    llm::check_perplexity(config, report.context, report.stride, request.allow_long_context);
    const llm::Tokenizer tokenizer = llm::load_tokenizer(request.model, config);
    const std::vector<int32_t> ids = tokenizer.encode(text, true);
    const auto model = load_llm(request.model, request.load);
    report.weights = model->weights_description();
    report.result = llm::perplexity(model, ids, report.context, report.stride, request.allow_long_context);
    return report;
}

}  // namespace ipex::commands
