// ipex-tool import {gptq|awq|auto} CHECKPOINT OUT: see commands/import.h.
#include "commands.h"
#include "commands/import.h"
#include "options.h"

namespace ipex::app {

Runner setup_import(CLI::App &sub) {
    auto r = std::make_shared<commands::ImportRequest>();
    auto json = std::make_shared<commands::JsonOutput>();
    sub.add_option("FORMAT", r->method, "gptq, awq, or auto (from the config files, then the tensor shapes)")
        ->required()
        ->check(CLI::IsMember({"gptq", "awq", "auto"}));
    sub.add_option("CHECKPOINT", r->checkpoint,
                   "safetensors file, model.safetensors.index.json, or a directory holding them")
        ->required();
    sub.add_option("OUT", r->out, "where to write the weight-only checkpoint (.safetensors)")->required();
    add_json_option(sub, *json, JsonForm::flag, "print the summary as JSON");
    sub.add_option("--bits", r->bits, "override the bit width of the config (4 or 8)")
        ->check(CLI::IsMember({4, 8}));
    sub.add_option("--group-size", r->group_size, "override the group size of the config (-1: per channel)")
        ->check(CLI::Range(-1, 1 << 20));
    sub.add_option("--checkpoint-format", r->checkpoint_format,
                   "GPTQ zero convention: gptq (v1, stored zero-1; the default) or gptq_v2")
        ->check(CLI::IsMember({"gptq", "gptq_v2"}));
    return [r, json] {
        commands::emit(*json, commands::run_import(*r));
        return 0;
    };
}

}  // namespace ipex::app
