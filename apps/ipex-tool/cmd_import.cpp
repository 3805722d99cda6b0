#include <iostream>
#include <sstream>

#include "commands.h"
#include "base/atomic_file.h"
#include "base/log.h"
#include "checkpoint/import_checkpoint.h"

namespace ipex::app {
namespace {

struct ImportArgs {
    std::string method, checkpoint, out;
    bool json = false;
    int bits = 0;
    int group_size = 0;
    std::string checkpoint_format;
};

std::string format_summary(const nlohmann::json &s, const std::string &out) {
    std::ostringstream o;
    o << "imported " << s["layers"].get<size_t>() << " layers from " << s["checkpoint"].get<std::string>() << "\n"
      << "  format      " << s["source_format"].get<std::string>() << " (" << s["zero_convention"].get<std::string>()
      << "; method from " << s["method_from"].get<std::string>() << ")\n"
      << "  bits        " << s["bits"] << "\n"
      << "  group size  " << (s["group_size"].get<int64_t>() == 0 ? std::string("mixed") : s["group_size"].dump())
      << "\n"
      << "  act-order   " << s["act_order_layers"] << " layers\n"
      << "  kept fp     " << s["full_precision_modules"].size() << " modules\n"
      << "  bytes       " << s["bytes_in"] << " -> " << s["bytes_out"] << " (" << out << ")\n";
    return o.str();
}

int run_import(const ImportArgs &a) {
    check_output_path(a.out, {a.checkpoint});
    woq::ImportOptions options;
    options.method = a.method;
    options.bits = a.bits;
    options.group_size = a.group_size;
    options.checkpoint_format = a.checkpoint_format;
    woq::ImportResult result = woq::import_checkpoint(a.checkpoint, options);
    check_output_path(a.out, result.files);
    woq::write_woq_checkpoint(a.out, result.checkpoint);
    result.summary["output"] = a.out;
    std::cout << (a.json ? result.summary.dump(2) + "\n" : format_summary(result.summary, a.out));
    return 0;
}

}  // namespace

Runner setup_import(CLI::App &sub) {
    auto a = std::make_shared<ImportArgs>();
    sub.add_option("FORMAT", a->method, "gptq, awq, or auto (from the config files, then the tensor shapes)")
        ->required()
        ->check(CLI::IsMember({"gptq", "awq", "auto"}));
    sub.add_option("CHECKPOINT", a->checkpoint,
                   "safetensors file, model.safetensors.index.json, or a directory holding them")
        ->required();
    sub.add_option("OUT", a->out, "where to write the weight-only checkpoint (.safetensors)")->required();
    sub.add_flag("--json", a->json, "print the summary as JSON");
    sub.add_option("--bits", a->bits, "override the bit width of the config (4 or 8)")
        ->check(CLI::IsMember({4, 8}));
    sub.add_option("--group-size", a->group_size, "override the group size of the config (-1: per channel)")
        ->check(CLI::Range(-1, 1 << 20));
    sub.add_option("--checkpoint-format", a->checkpoint_format,
                   "GPTQ zero convention: gptq (v1, stored zero-1; the default) or gptq_v2")
        ->check(CLI::IsMember({"gptq", "gptq_v2"}));
    return [a] { return run_import(*a); };
}

}  // namespace ipex::app
