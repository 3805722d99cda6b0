// ipex-tool info [--limits]: see commands/info.h.
#include "commands.h"
#include "commands/info.h"
#include "options.h"

namespace ipex::app {

Runner setup_info(CLI::App &sub) {
    auto r = std::make_shared<commands::InfoRequest>();
    auto json = std::make_shared<commands::JsonOutput>();
    add_json_option(sub, *json, JsonForm::flag, "print the report as JSON");
    auto *limits = sub.add_flag("--limits", r->limits,
                                "also measure the machine's limits (about 1.5 s): bf16 dot, fp32 FMA and int8 VNNI "
                                "peaks, read bandwidth");
    add_threads_option(sub, r->threads, "threads for --limits")->needs(limits);
    return [r, json] {
        commands::emit(*json, commands::run_info(*r));
        return 0;
    };
}

}  // namespace ipex::app
