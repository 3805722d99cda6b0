// ipex-tool perplexity MODEL_DIR --text FILE: a quality gate for converted/quantized models.
#include "commands.h"
#include "commands/perplexity.h"
#include "llm/generate.h"
#include "options.h"

namespace ipex::app {

Runner setup_perplexity(CLI::App &sub) {
    auto r = std::make_shared<commands::PerplexityRequest>();
    auto json = std::make_shared<commands::JsonOutput>();
    sub.add_option("MODEL_DIR", r->model, "Hugging Face model directory")->required();
    sub.add_option("--text", r->text, "UTF-8 text file to score")->required();
    sub.add_option("--context", r->context,
                   "tokens per window, " + llm::range_text(llm::counts::context) + ", within the positions the model "
                   "declares (default: " + std::to_string(llm::kDefaultContext) + ", or what the model declares when less)");
    sub.add_option("--stride", r->stride, "tokens between window starts, 1 to --context (default: context / 2)");
    sub.add_option("--max-ppl", r->max_ppl,
                   "exit 1 when the perplexity is above X (a perplexity that is not finite always exits 1)");
    sub.add_flag("--baseline", r->baseline,
                 "also score the model without --qconfig / --woq-dtype (same --dtype, same windows) and print the "
                 "relative change: what the quantization costs");
    sub.add_option("--max-increase", r->max_increase,
                   "exit 1 when the perplexity is more than PCT percent above the baseline's (implies --baseline)");
    add_json_option(sub, *json, JsonForm::flag, "print the result as JSON");
    add_allow_long_context(sub, r->allow_long_context);
    add_llm_load_options(sub, r->load);
    add_threads_option(sub, r->load.threads);
    return [r, json] {
        const auto report = commands::run_perplexity(*r);
        commands::emit(*json, report);
        report.check();
        return 0;
    };
}

}  // namespace ipex::app
