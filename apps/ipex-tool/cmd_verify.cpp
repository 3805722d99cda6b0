// ipex-tool verify A B: see commands/verify.h.
#include "commands.h"
#include "commands/verify.h"
#include "options.h"

namespace ipex::app {

Runner setup_verify(CLI::App &sub) {
    auto r = std::make_shared<commands::VerifyRequest>();
    auto json = std::make_shared<commands::JsonOutput>();
    sub.add_option("A", r->a, "reference model")->required();
    sub.add_option("B", r->b, "candidate model")->required();
    sub.add_option("--input", r->inputs, "input SPEC (repeatable); default: B's --sample-input")
        ->allow_extra_args(false);
    sub.add_option("--seed", r->seed, "seed for random inputs")->capture_default_str();
    sub.add_option("--min-cosine", r->min_cosine,
                   "minimum cosine similarity per output (default 0.99999 fp32, 0.999 bf16/fp16, 0.99 int8)")
        ->check(CLI::Range(-1.0, 1.0));
    sub.add_option("--atol", r->atol, "also require |a-b| <= atol + rtol*|a| elementwise")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--rtol", r->rtol, "relative part of the elementwise bound")->check(CLI::NonNegativeNumber);
    add_json_option(sub, *json, JsonForm::flag, "print the comparison as JSON");
    return [r, json] {
        const commands::VerifyReport report = commands::run_verify(*r);
        commands::emit(*json, report);
        report.check();
        return 0;
    };
}

}  // namespace ipex::app
