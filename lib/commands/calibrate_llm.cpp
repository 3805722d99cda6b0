#include "commands/calibrate_llm.h"

#include <algorithm>
#include <sstream>

#include "base/atomic_file.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "commands/threads.h"
#include "llm/config.h"
#include "llm/generate.h"
#include "llm/limits.h"
#include "llm/model.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"
#include "llm/w8a8_config.h"

#include <ATen/Parallel.h>

namespace ipex::commands {
namespace {
constexpr size_t kMaxTextBytes = size_t(64) << 20;
constexpr int64_t kMaxCalibrationTokens = int64_t(1) << 20;
}  // namespace

nlohmann::json CalibrateLlmReport::to_json() const {
    return {{"model", model}, {"out", out}, {"alpha", alpha}, {"tokens", tokens}, {"projections", projections}};
}

std::string CalibrateLlmReport::text() const {
    std::ostringstream s;
    s << "wrote " << out << " (" << projections << " projections, " << tokens << " tokens, alpha " << alpha << ")";
    return s.str();
}

CalibrateLlmReport run_calibrate_llm(const CalibrateLlmRequest &request) {
    if (!(request.alpha >= 0 && request.alpha <= 1))
        throw_usage("--alpha must be in [0, 1], got " + std::to_string(request.alpha));
    llm::check_count("--tokens", request.tokens, {2, kMaxCalibrationTokens});
    if (request.context) llm::check_count("--context", *request.context, llm::counts::context);
    thread_count(request.threads);
    check_output_path(request.out, {request.model, request.text});
    const std::string text = read_bounded_file(request.text, kMaxTextBytes, "--text file");
    std::vector<char32_t> check;
    if (!llm::unicode::decode_utf8(text, &check)) throw_bad_input("'" + request.text + "' is not valid UTF-8 text");
    const llm::ModelConfig config = llm::read_config(request.model);
    for (int64_t l = 0; l < config.num_layers; ++l)
        if (config.sparse(l))
            throw_unsupported("calibrate-llm: W8A8 of mixture-of-experts layers is not supported (layer " +
                              std::to_string(l) + " of this " + config.architecture + " is sparse)");
    const int64_t context = request.context.value_or(llm::default_context(config));
    llm::check_perplexity(config, context, context, false);
    std::vector<int32_t> ids = llm::load_tokenizer(request.model, config).encode(text, true);
    if (static_cast<int64_t>(ids.size()) > request.tokens) ids.resize(static_cast<size_t>(request.tokens));
    if (ids.size() < 2) throw_bad_input("'" + request.text + "' gives fewer than 2 tokens; calibration needs text");

    at::set_num_threads(thread_count(request.threads));
    llm::LoadOptions options;
    options.dtype = "fp32";
    options.lowp_mode = "fp32";
    options.observe = true;
    const auto model = llm::Model::load(request.model, options);
    // Every token once: windows of `context` with stride `context`.
    const llm::PerplexityResult run = llm::perplexity(model, ids, std::min<int64_t>(context, static_cast<int64_t>(ids.size())),
                                                      std::min<int64_t>(context, static_cast<int64_t>(ids.size())));
    (void)run;
    std::vector<llm::W8A8Observation> observed;
    for (const auto &o : model->observers()) observed.push_back({o->name(), o->act_max(), o->weight_max()});
    const nlohmann::json j = llm::w8a8_config_json(observed, request.alpha, static_cast<int64_t>(ids.size()), config);
    write_text_atomically(request.out, j.dump() + "\n");
    CalibrateLlmReport report;
    report.model = request.model;
    report.out = request.out;
    report.alpha = request.alpha;
    report.tokens = static_cast<int64_t>(ids.size());
    report.projections = static_cast<int64_t>(observed.size());
    return report;
}

}  // namespace ipex::commands
