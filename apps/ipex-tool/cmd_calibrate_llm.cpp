// ipex-tool calibrate-llm MODEL_DIR --text FILE -o QCONF.json: SmoothQuant calibration (W8A8).
#include "base/log.h"
#include "commands.h"
#include "commands/calibrate_llm.h"
#include "llm/generate.h"
#include "llm/limits.h"
#include "options.h"

namespace ipex::app {

Runner setup_calibrate_llm(CLI::App &sub) {
    auto r = std::make_shared<commands::CalibrateLlmRequest>();
    auto json = std::make_shared<commands::JsonOutput>();
    sub.add_option("MODEL_DIR", r->model, "Hugging Face model directory (dense weights)")->required();
    sub.add_option("--text", r->text, "UTF-8 calibration text")->required();
    sub.add_option("-o,--out", r->out, "where to write the W8A8 qconfig JSON")->required();
    sub.add_option("--alpha", r->alpha,
                   "SmoothQuant migration strength in [0, 1]: s_j = max|X_j|^alpha / max|W_j|^(1-alpha)")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    sub.add_option("--tokens", r->tokens, "calibrate on the text's first N tokens, 2 to 1048576")
        ->capture_default_str();
    sub.add_option("--context", r->context,
                   "tokens per window, " + llm::range_text(llm::counts::context) + " (default: " +
                       std::to_string(llm::kDefaultContext) + ", or what the model declares when less)");
    add_json_option(sub, *json, JsonForm::flag, "print the report as JSON");
    add_threads_option(sub, r->threads);
    return [r, json] {
        const auto report = commands::run_calibrate_llm(*r);
        if (json->wanted()) commands::emit(*json, report);
        else log::info(report.text());
        return 0;
    };
}

}  // namespace ipex::app
