#include "commands/perplexity.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "base/bounded_file.h"
#include "base/errors.h"
#include "llm/config.h"
#include "llm/tensor_source.h"
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

nlohmann::json result_json(const llm::PerplexityResult &r) {
    const double nll_mean = r.scored > 0 ? r.nll / static_cast<double>(r.scored) : std::nan("");
    nlohmann::json j = {{"perplexity", number_or_null(r.perplexity)}, {"finite", r.finite},
                        {"nll_mean", number_or_null(nll_mean)}, {"tokens", r.tokens}, {"scored", r.scored},
                        {"windows", r.windows}, {"seconds", r.seconds}};
    j["non_finite_position"] = r.non_finite_position >= 0 ? nlohmann::json(r.non_finite_position) : nlohmann::json(nullptr);
    return j;
}

// "+1.25%" (signed: a change) or "1.25%" (a limit).
std::string percent_text(double v, bool sign = true) {
    std::ostringstream out;
    if (sign) out << std::showpos;
    out << std::fixed << std::setprecision(2) << v << "%";
    return out.str();
}

// The first matrix of a GGUF file stored in a quantized type, as "q4_0 (model.layers.0...)",
// else "".
std::string gguf_quantized_matrix(const std::string &path) {
    const auto source = llm::gguf_source(path);
    for (const auto &name : llm::gguf_tensor_names(path)) {
        if (source->shape(name).size() != 2) continue;
        const std::string type = source->dtype(name);
        if (type != "F32" && type != "F16" && type != "BF16") return type + " (" + name + ")";
    }
    return "";
}

}  // namespace

double PerplexityReport::increase_percent() const {
    if (!baseline || !result.finite || !baseline->result.finite) return std::nan("");
    return (result.perplexity / baseline->result.perplexity - 1.0) * 100.0;
}

bool PerplexityReport::ok() const {
    if (!result.finite || (max_ppl && result.perplexity > *max_ppl)) return false;
    if (baseline && !baseline->result.finite) return false;
    return !max_increase || increase_percent() <= *max_increase;
}

nlohmann::json PerplexityReport::to_json() const {
    nlohmann::json j = result_json(result);
    j.update(nlohmann::json{{"model", model},     {"weights", weights}, {"text", text_file},
                            {"context", context}, {"stride", stride},   {"ok", ok()}});
    j["max_ppl"] = max_ppl ? nlohmann::json(*max_ppl) : nlohmann::json(nullptr);
    if (baseline) {
        j["baseline"] = result_json(baseline->result);
        j["baseline"]["weights"] = baseline->weights;
    } else {
        j["baseline"] = nullptr;
    }
    j["increase_percent"] = number_or_null(increase_percent());
    j["max_increase_percent"] = max_increase ? nlohmann::json(*max_increase) : nlohmann::json(nullptr);
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
    if (baseline) {
        const llm::PerplexityResult &b = baseline->result;
        out << "baseline (" << baseline->weights << ") ";
        if (b.finite) out << std::fixed << std::setprecision(4) << "perplexity " << b.perplexity;
        else out << "perplexity not finite (" << why_not_finite(b) << ")";
        if (r.finite && b.finite) out << ": " << percent_text(increase_percent());
        if (max_increase) out << " (limit " << percent_text(*max_increase, false) << ")";
        out << "\n";
    }
    return out.str();
}

void PerplexityReport::check() const {
    if (!result.finite)
        throw_check_failed("the perplexity is not finite (" + why_not_finite(result) +
                           "): the checkpoint's weights or the model's arithmetic produced NaN/Inf");
    if (baseline && !baseline->result.finite)
        throw_check_failed("the baseline's perplexity (" + baseline->weights + ") is not finite (" +
                           why_not_finite(baseline->result) + "): the model fails before any quantization");
    if (max_ppl && result.perplexity > *max_ppl)
        throw_check_failed("perplexity " + std::to_string(result.perplexity) + " is above --max-ppl " +
                           std::to_string(*max_ppl));
    if (!ok())
        throw_check_failed("perplexity " + std::to_string(result.perplexity) + " is " +
                           percent_text(increase_percent(), false) + " above the baseline's " +
                           std::to_string(baseline->result.perplexity) + " (" + baseline->weights +
                           "), more than --max-increase " + percent_text(*max_increase, false));
}

PerplexityReport run_perplexity(const PerplexityRequest &request) {
    // Options, the text, the config and the tokenizer are checked before the weights load.
    if (request.context) llm::check_count("--context", *request.context, llm::counts::context);
    if (request.stride) llm::check_count("--stride", *request.stride, llm::counts::stride);
    if (request.max_ppl && !(*request.max_ppl > 0))
        throw_usage("--max-ppl must be a number > 0, got " + std::to_string(*request.max_ppl));
    if (request.max_increase && !(*request.max_increase >= 0 && std::isfinite(*request.max_increase)))
        throw_usage("--max-increase must be a percentage >= 0, got " + std::to_string(*request.max_increase));
    const bool baseline = request.baseline || request.max_increase;
    if (baseline && request.load.qconfig.empty() && request.load.woq.dtype.empty())
        throw_usage(std::string(request.max_increase ? "--max-increase" : "--baseline") +
                    " compares the model with --qconfig or --woq-dtype against the model without them: give one");
    request.load.check();
    if (baseline && llm::is_gguf(request.model)) {
        // Its weights were quantized before it was written: no unquantized model to score.
        const std::string quantized = gguf_quantized_matrix(request.model);
        if (!quantized.empty())
            throw_usage("--baseline: '" + request.model + "' holds quantized weights already (" + quantized +
                        "); the model they came from is not in the file: give --baseline with the original checkpoint");
    }
    const std::string text = read_bounded_file(request.text, kMaxTextBytes, "--text file");
    std::vector<char32_t> check;
    if (!llm::unicode::decode_utf8(text, &check)) throw_bad_input("'" + request.text + "' is not valid UTF-8 text");
    const llm::ModelConfig config = llm::read_config(request.model);
    PerplexityReport report;
    report.model = request.model;
    report.text_file = request.text;
    report.max_ppl = request.max_ppl;
    report.max_increase = request.max_increase;
    report.context = request.context.value_or(llm::default_context(config));
    report.stride = request.stride.value_or(std::max<int64_t>(1, report.context / 2));
    llm::check_perplexity(config, report.context, report.stride, request.allow_long_context);
    const llm::Tokenizer tokenizer = llm::load_tokenizer(request.model, config);
    const std::vector<int32_t> ids = tokenizer.encode(text, true);
    if (baseline) {
        LlmLoadRequest plain = request.load;
        plain.qconfig.clear();
        plain.woq = WoqRequest{};
        const auto model = load_llm(request.model, plain);
        report.baseline = PerplexityBaseline{model->weights_description(),
                                             llm::perplexity(model, ids, report.context, report.stride,
                                                             request.allow_long_context)};
    }
    const auto model = load_llm(request.model, request.load);
    report.weights = model->weights_description();
    report.result = llm::perplexity(model, ids, report.context, report.stride, request.allow_long_context);
    return report;
}

}  // namespace ipex::commands
