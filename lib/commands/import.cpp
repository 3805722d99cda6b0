#include "commands/import.h"

#include <sstream>

#include "base/atomic_file.h"
#include "checkpoint/import_checkpoint.h"
#include "checkpoint/woq_format.h"

namespace ipex::commands {

std::string ImportReport::text() const {
    const nlohmann::json &s = summary;
    std::ostringstream o;
    o << "imported " << s["layers"].get<size_t>() << " layers from " << s["checkpoint"].get<std::string>() << "\n"
      << "  format      " << s["source_format"].get<std::string>() << " (" << s["zero_convention"].get<std::string>()
      << "; method from " << s["method_from"].get<std::string>() << ")\n"
      << "  bits        " << s["bits"] << "\n"
      << "  group size  " << (s["group_size"].get<int64_t>() == 0 ? std::string("mixed") : s["group_size"].dump())
      << "\n"
      << "  act-order   " << s["act_order_layers"] << " layers\n"
      << "  kept fp     " << s["full_precision_modules"].size() << " modules\n"
      << "  bytes       " << s["bytes_in"] << " -> " << s["bytes_out"] << " (" << s["output"].get<std::string>()
      << ")\n";
    return o.str();
}

ImportReport run_import(const ImportRequest &r) {
    check_output_path(r.out, {r.checkpoint});
    woq::ImportOptions options;
    options.method = r.method;
    options.bits = r.bits;
    options.group_size = r.group_size;
    options.checkpoint_format = r.checkpoint_format;
    woq::ImportResult result = woq::import_checkpoint(r.checkpoint, options);
    check_output_path(r.out, result.files);
    woq::write_woq_checkpoint(r.out, result.checkpoint);
    result.summary["output"] = r.out;
    return {result.summary};
}

}  // namespace ipex::commands
