// ipex-tool import {gptq|awq|auto} CHECKPOINT OUT, import gguf IN.gguf OUT_DIR: see
// commands/import.h and commands/import_gguf.h.
#include "base/errors.h"
#include "commands.h"
#include "commands/import.h"
#include "commands/import_gguf.h"
#include "options.h"

namespace ipex::app {

Runner setup_import(CLI::App &sub) {
    auto r = std::make_shared<commands::ImportRequest>();
    auto g = std::make_shared<commands::ImportGgufRequest>();
    auto json = std::make_shared<commands::JsonOutput>();
    sub.add_option("FORMAT", r->method,
                   "gptq, awq, or auto (from the config files, then the tensor shapes); gguf: a GGUF file to a "
                   "Hugging Face model directory")
        ->required()
        ->check(CLI::IsMember({"gptq", "awq", "auto", "gguf"}));
    sub.add_option("CHECKPOINT", r->checkpoint,
                   "safetensors file, model.safetensors.index.json, or a directory holding them; for gguf the .gguf file")
        ->required();
    sub.add_option("OUT", r->out,
                   "where to write the weight-only checkpoint (.safetensors); for gguf the model directory (new or empty)")
        ->required();
    add_json_option(sub, *json, JsonForm::flag, "print the summary as JSON");
    auto *bits = sub.add_option("--bits", r->bits, "override the bit width of the config (4 or 8)")
                     ->check(CLI::IsMember({4, 8}));
    auto *group = sub.add_option("--group-size", r->group_size, "override the group size of the config (-1: per channel)")
                      ->check(CLI::Range(-1, 1 << 20));
    auto *format = sub.add_option("--checkpoint-format", r->checkpoint_format,
                                  "GPTQ zero convention: gptq (v1, stored zero-1; the default) or gptq_v2")
                       ->check(CLI::IsMember({"gptq", "gptq_v2"}));
    auto *dtype = sub.add_option("--dtype", g->dtype,
                                 "gguf: the dtype of the written weights, fp32 (exact for every GGUF type) or bf16")
                      ->default_str("fp32")
                      ->check(CLI::IsMember({"fp32", "bf16"}));
    auto *force = sub.add_flag("--force", g->force, "gguf: replace an OUT directory that holds files");
    return [r, g, json, bits, group, format, dtype, force] {
        if (r->method == "gguf") {
            for (const CLI::Option *o : {bits, group, format})
                if (o->count() > 0) throw_usage(o->get_name() + " is for gptq/awq imports, not gguf");
            g->checkpoint = r->checkpoint;
            g->out = r->out;
            commands::emit(*json, commands::run_import_gguf(*g));
            return 0;
        }
        for (const CLI::Option *o : {dtype, force})
            if (o->count() > 0) throw_usage(o->get_name() + " is for gguf imports");
        commands::emit(*json, commands::run_import(*r));
        return 0;
    };
}

}  // namespace ipex::app
